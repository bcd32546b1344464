import Foundation
import HabitFlowAuth
import HabitFlowAuthProtos
import HabitFlowCalendar
import HabitFlowEvents
import HabitFlowGoals
import HabitFlowGoalsProtos
import HabitFlowHabits
import HabitFlowHabitsProtos
import HabitFlowInternalCredential
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import HabitFlowServiceKit
import HabitFlowSocial
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Logging
import SwiftProtobuf
import Testing

typealias SocialClient = Habitflow_Social_V1_SocialService.Client
typealias SocialInternalClient = Habitflow_Social_V1_SocialInternal.Client
typealias HabitsClient = Habitflow_Habits_V1_HabitsService.Client
typealias GoalsClient = Habitflow_Goals_V1_GoalsService.Client

let testLogger: Logger = {
    var logger = Logger(label: "social-tests")
    logger.logLevel = .critical
    return logger
}()

/// Real auth, habits, goals and social services on the test database, wired as in the stack: social asks auth for
/// people and habits for weekly scores, goals asks social for partners, and social's outbox delivers its partnership
/// events to goals. One set for the whole run; tests isolate themselves with fresh users, each with its own clock.
///
/// Auth's and habits' outbox relays do not run: their outbox tables are shared with their own suites (and goals'),
/// whose hosts deliver what they publish. Tests deliver auth's account events and habits' CategoryDeleted by hand
/// (``deliver(_:aggregate:source:to:)``), as those relays would.
struct SocialFixture: Sendable {
    static let secret = "social-test-secret"
    static let shared = Task { try await SocialFixture.start() }

    let auth: ServiceHost
    let habits: ServiceHost
    let goals: ServiceHost
    let social: ServiceHost
    let clocks: TestClocks
    /// Signed as the gateway, which adds the user (`CallOptions.onBehalf(of:)`).
    let authChannel: RPCChannel
    let habitsChannel: RPCChannel
    let goalsChannel: RPCChannel
    let socialChannel: RPCChannel
    /// Signed as auth: account events and internal calls.
    let habitsInternalChannel: RPCChannel
    let goalsInternalChannel: RPCChannel
    let socialInternalChannel: RPCChannel

    static func start() async throws -> SocialFixture {
        let clocks = TestClocks()
        var settings = AuthSettings(keyEncryptionKey: [UInt8](repeating: 7, count: 32))
        settings.bcryptCost = 4
        settings.passwordHashingThreads = 2
        settings.maintenanceInterval = nil
        let auth = try await ServiceHost.start(
            AuthServiceDefinition.make(settings: settings).withoutOutboxRelay,
            configuration: try configuration("auth", port: 0), logger: testLogger)
        let habits = try await ServiceHost.start(
            HabitsServiceDefinition.make(clock: clocks.clock).withoutOutboxRelay,
            configuration: try configuration("habits", port: 0), logger: testLogger)
        // Goals asks social for partners, and social's relay delivers to goals: social's port is chosen first. Another
        // suite's server may take it before social binds it; then both start again on another.
        var attempts = 0
        var goals: ServiceHost
        var social: ServiceHost
        while true {
            attempts += 1
            let socialPort = try await freePort()
            goals = try await ServiceHost.start(
                GoalsServiceDefinition.make(clock: clocks.clock),
                configuration: try configuration(
                    "goals", port: 0, addresses: ["habits": habits.port, "social": socialPort]),
                logger: testLogger)
            do {
                social = try await ServiceHost.start(
                    SocialServiceDefinition.make(clock: clocks.clock),
                    configuration: try configuration(
                        "social", port: socialPort,
                        addresses: ["auth": auth.port, "habits": habits.port, "goals": goals.port]),
                    logger: testLogger)
                break
            } catch where attempts < 5 {
                await goals.shutdown()
            }
        }
        return SocialFixture(
            auth: auth, habits: habits, goals: goals, social: social, clocks: clocks,
            authChannel: try channel(to: auth.port, signedAs: "gateway"),
            habitsChannel: try channel(to: habits.port, signedAs: "gateway"),
            goalsChannel: try channel(to: goals.port, signedAs: "gateway"),
            socialChannel: try channel(to: social.port, signedAs: "gateway"),
            habitsInternalChannel: try channel(to: habits.port, signedAs: "auth"),
            goalsInternalChannel: try channel(to: goals.port, signedAs: "auth"),
            socialInternalChannel: try channel(to: social.port, signedAs: "auth"))
    }

    static func configuration(_ service: String, port: Int, addresses: [String: Int] = [:]) throws
        -> ServiceConfiguration
    {
        var configuration = ServiceConfiguration(
            service: service, port: port, databaseURL: try TestEnvironment.serviceURL(service),
            sqlDirectory: TestEnvironment.sqlRoot, internalSecret: secret)
        configuration.metricsPort = nil
        configuration.databasePoolSize = 8
        configuration.serviceAddresses = addresses.mapValues { [.init(host: "127.0.0.1", port: $0)] }
        return configuration
    }

    static func freePort() async throws -> Int { try await freeLoopbackPort(logger: testLogger) }

    static func channel(to port: Int, signedAs caller: String) throws -> RPCChannel {
        try internalChannel(to: port, signedAs: caller, secret: secret, logger: testLogger)
    }

    var socialInternal: SocialInternalClient { SocialInternalClient(transport: socialInternalChannel) }

    /// Delivers an event to the services in `services` as the publisher's relay would.
    func deliver(
        _ payload: some SwiftProtobuf.Message, aggregate: (type: String, id: String), source: String,
        to services: [RPCChannel]
    ) async throws {
        let id = UUID().uuidString.lowercased()
        for channel in services {
            _ = try await Habitflow_Events_V1_EventSubscriber.Client(transport: channel).deliver(
                .with {
                    $0.event.id = id
                    $0.event.type = type(of: payload).protoMessageName
                    $0.event.aggregateType = aggregate.type
                    $0.event.aggregateID = aggregate.id
                    $0.event.occurredAt = Google_Protobuf_Timestamp(date: Date())
                    $0.event.payload = try payload.serializedData()
                    $0.event.source = source
                })
        }
    }

    /// Delivers one of auth's account events to habits, goals and social.
    func deliverAccountEvent(_ payload: some SwiftProtobuf.Message, userID: String) async throws {
        try await deliver(
            payload, aggregate: ("user", userID), source: "auth",
            to: [habitsInternalChannel, goalsInternalChannel, socialInternalChannel])
    }
}

/// A fresh account registered with auth (so lookups by email and username find it), announced to the other services
/// as auth's UserCreated would be, calling every public API through the gateway's credential.
struct TestUser: Sendable {
    let id: UUID
    let email: String
    let username: String
    let displayName: String
    let fixture: SocialFixture
    let social: SocialClient
    let habits: HabitsClient
    let goals: GoalsClient

    /// - Parameter timeZone: the account's IANA zone.
    init(displayName: String? = nil, timeZone: String = "UTC") async throws {
        fixture = try await SocialFixture.shared.value
        let suffix = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        email = "so-\(suffix)@example.com"
        username = "so_\(suffix)"
        self.displayName = displayName ?? username
        let auth = Habitflow_Auth_V1_AuthService.Client(transport: fixture.authChannel)
        let registered = try await auth.register(
            .with { [email, username, displayName] in
                $0.email = email
                $0.username = username
                $0.password = "correct horse \(suffix)"
                $0.timeZone = timeZone
                if let displayName { $0.displayName = displayName }
            })
        id = try #require(UUID(uuidString: registered.user.id))
        social = SocialClient(transport: fixture.socialChannel)
        habits = HabitsClient(transport: fixture.habitsChannel)
        goals = GoalsClient(transport: fixture.goalsChannel)
        var created = Habitflow_Events_V1_UserUpdated()
        created.userID = userID
        created.username = username
        created.displayName = self.displayName
        created.timeZone = timeZone
        created.updatedAt = Google_Protobuf_Timestamp(date: Date())
        try await fixture.deliverAccountEvent(created, userID: userID)
    }

    var options: CallOptions { .onBehalf(of: id) }
    var userID: String { id.uuidString.lowercased() }

    /// Puts this user's "now" at an ISO 8601 instant such as `2026-01-14T12:00:00Z`, in every service.
    func setNow(_ instant: String) throws {
        fixture.clocks.set(try instantFrom(instant), for: id)
    }

    /// Announces the account's deletion to habits, goals and social, as auth's UserDeleted does.
    func deleteAccount() async throws {
        var deleted = Habitflow_Events_V1_UserDeleted()
        deleted.userID = userID
        deleted.deletedAt = Google_Protobuf_Timestamp(date: Date())
        try await fixture.deliverAccountEvent(deleted, userID: userID)
    }

    func createHabit(_ name: String, weeklyTarget: Int32 = 7) async throws -> Habitflow_Habits_V1_Habit {
        try await habits.createHabit(
            .with {
                $0.name = name
                $0.weeklyTarget = weeklyTarget
            }, options: options)
    }

    /// `times` check-ins of `habit` on the user's today.
    func checkIn(_ habit: Habitflow_Habits_V1_Habit, times: Int = 1) async throws {
        for _ in 0..<times {
            _ = try await habits.markHabitDone(.with { $0.habitID = habit.id }, options: options)
        }
    }
}
