import HabitFlowInternalCredential
import HabitFlowCalendar
import Foundation
import HabitFlowEvents
import HabitFlowGRPCProtos
import HabitFlowHabits
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import HabitFlowServiceKit
import HabitFlowTestSupport
import Logging
import SwiftProtobuf
import HabitFlowLocking
import Testing

typealias Habit = Habitflow_Habits_V1_Habit
typealias Category = Habitflow_Habits_V1_Category
typealias Entry = Habitflow_Habits_V1_Entry
typealias WeekView = Habitflow_Habits_V1_WeekView
typealias ProtoDate = Habitflow_Habits_V1_LocalDate
typealias ProtoWeek = Habitflow_Habits_V1_IsoWeek

let testLogger: Logger = {
    var logger = Logger(label: "habits-tests")
    logger.logLevel = .critical
    return logger
}()

/// Stands in for the goals service: records the events the habits outbox relay delivers.
final class EventRecorder: Habitflow_Events_V1_EventSubscriber.Handler {
    private let received = Locked<[Habitflow_Events_V1_EventEnvelope]>([])

    var events: [Habitflow_Events_V1_EventEnvelope] { received.withLock { $0 } }

    func deliver(
        request: Habitflow_Events_V1_DeliverEventRequest, context: ServerContext
    ) async throws -> Habitflow_Events_V1_DeliverEventResponse {
        received.withLock { $0.append(request.event) }
        return .with { $0.applied = true }
    }
}

/// One habits service for the whole test run (tests isolate themselves with fresh users), with the goals stand-in
/// its relay delivers to. Every habits host the tests start shares the outbox table, so each must deliver to the
/// same recorder.
struct HabitsFixture: Sendable {
    static let secret = "habits-test-secret"
    static let shared = Task { try await HabitsFixture.start() }

    let host: ServiceHost
    /// Signed as the gateway, which adds the user (`CallOptions.onBehalf(of:)`).
    let channel: RPCChannel
    /// Signed as auth: how account events arrive.
    let authChannel: RPCChannel
    let clocks: TestClocks
    let recorder: EventRecorder
    let recorderServer: RPCServer

    static func start() async throws -> HabitsFixture {
        let recorder = EventRecorder()
        let recorderServer = RPCServer(
            configuration: RPCServerConfiguration(host: "127.0.0.1", port: 0), services: [recorder], interceptors: [],
            logger: testLogger)
        try await recorderServer.start()
        let clocks = TestClocks()
        let host = try await ServiceHost.start(
            definition(clock: clocks.clock),
            configuration: try configuration(goalsPort: try #require(recorderServer.localAddress?.port)),
            logger: testLogger)
        return HabitsFixture(
            host: host, channel: try channel(to: host, signedAs: "gateway"),
            authChannel: try channel(to: host, signedAs: "auth"), clocks: clocks, recorder: recorder,
            recorderServer: recorderServer)
    }

    /// The service with its events routed to goals, here the stand-in: the service itself has no subscriber for them
    /// until goals lands, and its relay would drop them.
    static func definition(clock: UserClock, weekViews: WeekViewCache = WeekViewCache()) -> ServiceDefinition {
        var definition = HabitsServiceDefinition.make(clock: clock, weekViews: weekViews)
        for eventType in definition.eventRoutes.keys { definition.eventRoutes[eventType] = ["goals"] }
        return definition
    }

    static func configuration(goalsPort: Int) throws -> ServiceConfiguration {
        var configuration = ServiceConfiguration(
            service: "habits", port: 0, databaseURL: try TestEnvironment.serviceURL("habits"),
            sqlDirectory: TestEnvironment.sqlRoot, internalSecret: secret)
        configuration.metricsPort = nil
        configuration.databasePoolSize = 8
        configuration.serviceAddresses["goals"] = [.init(host: "127.0.0.1", port: goalsPort)]
        return configuration
    }

    /// Another replica of the service on the same database, with the same clocks and the week view cache given;
    /// stop it with `shutdown()`.
    func startReplica(weekViews: WeekViewCache) async throws -> ServiceHost {
        try await ServiceHost.start(
            Self.definition(clock: clocks.clock, weekViews: weekViews),
            configuration: try Self.configuration(goalsPort: try #require(recorderServer.localAddress?.port)),
            logger: testLogger)
    }

    /// A channel to the host that signs its calls as `caller`.
    static func channel(to host: ServiceHost, signedAs caller: String) throws -> RPCChannel {
        try internalChannel(to: host.port, signedAs: caller, secret: secret, logger: testLogger)
    }

    /// Delivers an account event as auth's outbox relay would; returns whether the service applied it (false for a
    /// redelivery).
    @discardableResult
    func deliver(_ payload: some SwiftProtobuf.Message, aggregateID: String, eventID: UUID = UUID()) async throws -> Bool {
        let subscriber = Habitflow_Events_V1_EventSubscriber.Client(transport: authChannel)
        return try await subscriber.deliver(
            .with {
                $0.event.id = eventID.uuidString.lowercased()
                $0.event.type = type(of: payload).protoMessageName
                $0.event.aggregateType = "user"
                $0.event.aggregateID = aggregateID
                $0.event.occurredAt = Google_Protobuf_Timestamp(date: Date())
                $0.event.payload = try payload.serializedData()
                $0.event.source = "auth"
            }
        ).applied
    }

    /// The payload of an event the service published about `aggregateID`: delivered to the goals stand-in, or still
    /// in the outbox. Every habits host of the test run shares that outbox, and the hosts other suites start run no
    /// relay: an event leaves the outbox only through this fixture's relay.
    func published(_ type: String, aggregateID: String) async throws -> Data? {
        if let delivered = recorder.events.first(where: { $0.type == type && $0.aggregateID == aggregateID }) {
            return delivered.payload
        }
        let row = try await pool.queryRow(
            "SELECT payload FROM outbox WHERE event_type = \(type) AND aggregate_id = \(aggregateID) ORDER BY sequence LIMIT 1")
        if let row { return try row.decode(0, as: Data.self) }
        // Delivered between the two looks.
        return recorder.events.first { $0.type == type && $0.aggregateID == aggregateID }?.payload
    }

    /// Internal API, called as another service.
    var internalAPI: Habitflow_Habits_V1_HabitsInternal.Client {
        Habitflow_Habits_V1_HabitsInternal.Client(transport: authChannel)
    }

    /// The service's own role on the test database, for checks the API cannot make.
    var pool: PostgresPool { host.runtime.pool }
}

/// A fresh user calling the public API through the gateway's credential.
struct TestUser {
    let id = UUID()
    let fixture: HabitsFixture
    let api: Habitflow_Habits_V1_HabitsService.Client

    init() async throws {
        fixture = try await HabitsFixture.shared.value
        api = Habitflow_Habits_V1_HabitsService.Client(transport: fixture.channel)
    }

    var options: CallOptions { .onBehalf(of: id) }

    /// Puts this user's "now" at an ISO 8601 instant such as `2026-01-14T12:00:00Z`.
    func setNow(_ instant: String) throws {
        fixture.clocks.set(try instantFrom(instant), for: id)
    }

    func createHabit(
        _ name: String, target: Int32? = nil, category: String = "", unit: String = "", id: String = ""
    ) async throws -> Habit {
        try await api.createHabit(
            .with {
                $0.name = name
                if let target { $0.weeklyTarget = target }
                $0.categoryID = category
                $0.unit = unit
                $0.habitID = id
            }, options: options)
    }

    @discardableResult
    func markDone(_ habit: Habit, on date: ProtoDate? = nil, value: Double? = nil, entryID: String = "") async throws -> Entry {
        try await api.markHabitDone(
            .with {
                $0.habitID = habit.id
                if let date { $0.date = date }
                if let value { $0.value = value }
                $0.entryID = entryID
            }, options: options)
    }

    @discardableResult
    func markNotDone(_ habit: Habit, on date: ProtoDate? = nil) async throws -> Int32 {
        try await api.markHabitNotDone(
            .with {
                $0.habitID = habit.id
                if let date { $0.date = date }
            }, options: options
        ).removedEntries
    }

    func updateTarget(_ habit: Habit, to target: Int32) async throws -> Habit {
        try await api.updateHabit(
            .with {
                $0.habit.id = habit.id
                $0.habit.weeklyTarget = target
                $0.updateMask.paths = ["weekly_target"]
            }, options: options)
    }

    func rename(_ habit: Habit, to name: String) async throws -> Habit {
        try await api.updateHabit(
            .with {
                $0.habit.id = habit.id
                $0.habit.name = name
                $0.updateMask.paths = ["name"]
            }, options: options)
    }

    func delete(_ habit: Habit) async throws -> Habit {
        try await api.deleteHabit(.with { $0.habitID = habit.id }, options: options)
    }

    /// The week view: of the current week, or of `year`-W`week`.
    func week(_ year: Int32? = nil, _ week: Int32? = nil) async throws -> WeekView {
        try await api.getWeek(
            .with {
                if let year, let week { $0.week = isoWeek(year, week) }
            }, options: options)
    }

    func categories() async throws -> [Category] {
        try await api.listCategories(.init(), options: options).categories
    }

    /// Sets the account's time zone the way auth announces it.
    func setTimeZone(_ zone: String, changedAt: Date = Date()) async throws {
        var event = Habitflow_Events_V1_UserUpdated()
        event.userID = id.uuidString.lowercased()
        event.timeZone = zone
        event.updatedAt = Google_Protobuf_Timestamp(date: changedAt)
        try await fixture.deliver(event, aggregateID: event.userID)
    }

    /// "X/Y" of a habit in a week view.
    static func progress(of habit: Habit, in view: WeekView) -> String? {
        view.habits.first { $0.habit.id == habit.id }?.progress
    }
}

func date(_ year: Int32, _ month: Int32, _ day: Int32) -> ProtoDate {
    .with {
        $0.year = year
        $0.month = month
        $0.day = day
    }
}

func isoWeek(_ year: Int32, _ week: Int32) -> ProtoWeek {
    .with {
        $0.year = year
        $0.week = week
    }
}

