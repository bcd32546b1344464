import HabitFlowInternalCredential
import HabitFlowCalendar
import Foundation
import HabitFlowEvents
import HabitFlowGRPCProtos
import HabitFlowGoals
import HabitFlowGoalsProtos
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
import Testing

typealias Goal = Habitflow_Goals_V1_Goal
typealias Habit = Habitflow_Habits_V1_Habit
typealias GoalsClient = Habitflow_Goals_V1_GoalsService.Client
typealias HabitsClient = Habitflow_Habits_V1_HabitsService.Client

let testLogger: Logger = {
    var logger = Logger(label: "goals-tests")
    logger.logLevel = .critical
    return logger
}()

/// A real habits service and a real goals service on the test database, wired as in the stack: goals calls habits'
/// internal API, and habits' outbox delivers CategoryDeleted and HabitDeleted to goals. One pair for the whole run;
/// tests isolate themselves with fresh users, each with its own clock.
struct GoalsFixture: Sendable {
    static let secret = "goals-test-secret"
    static let shared = Task { try await GoalsFixture.start() }

    let goals: ServiceHost
    let habits: ServiceHost
    let clocks: TestClocks
    /// Signed as the gateway, which adds the user (`CallOptions.onBehalf(of:)`).
    let goalsChannel: RPCChannel
    let habitsChannel: RPCChannel
    /// Signed as auth: account events, internal calls.
    let goalsInternalChannel: RPCChannel
    let habitsInternalChannel: RPCChannel

    static func start() async throws -> GoalsFixture {
        let clocks = TestClocks()
        // Goals' port is chosen first, so habits' relay knows where goals listens before goals starts.
        let goalsPort = try await freePort()
        var habitsConfiguration = configuration("habits", port: 0)
        habitsConfiguration.serviceAddresses["goals"] = [.init(host: "127.0.0.1", port: goalsPort)]
        let habits = try await ServiceHost.start(
            HabitsServiceDefinition.make(clock: clocks.clock), configuration: try habitsConfiguration.resolved(),
            logger: testLogger)
        let goals = try await startGoals(port: goalsPort, habitsPort: habits.port, clock: clocks.clock)
        return GoalsFixture(
            goals: goals, habits: habits, clocks: clocks,
            goalsChannel: try channel(to: goals.port, signedAs: "gateway"),
            habitsChannel: try channel(to: habits.port, signedAs: "gateway"),
            goalsInternalChannel: try channel(to: goals.port, signedAs: "auth"),
            habitsInternalChannel: try channel(to: habits.port, signedAs: "auth"))
    }

    /// A goals host on `port` (0: any) calling habits on `habitsPort`.
    static func startGoals(port: Int, habitsPort: Int, clock: UserClock) async throws -> ServiceHost {
        var configuration = configuration("goals", port: port)
        configuration.serviceAddresses["habits"] = [.init(host: "127.0.0.1", port: habitsPort)]
        // Social does not run here (nothing listens on port 1): sharing a goal answers UNAVAILABLE. Shared goals are
        // tested with social in Tests/SocialTests/SharedGoalsTests.swift.
        configuration.serviceAddresses["social"] = [.init(host: "127.0.0.1", port: 1)]
        return try await ServiceHost.start(
            GoalsServiceDefinition.make(clock: clock), configuration: try configuration.resolved(), logger: testLogger)
    }

    /// Another goals replica on the same database, with an empty progress cache: what every figure is after the
    /// caches are dropped. Stop it with `shutdown()`.
    func startReplica() async throws -> ServiceHost {
        try await Self.startGoals(port: 0, habitsPort: habits.port, clock: clocks.clock)
    }

    struct PendingConfiguration {
        var service: String
        var port: Int
        var serviceAddresses: [String: [RPCChannelConfiguration.Target]] = [:]

        func resolved() throws -> ServiceConfiguration {
            var configuration = ServiceConfiguration(
                service: service, port: port, databaseURL: try TestEnvironment.serviceURL(service),
                sqlDirectory: TestEnvironment.sqlRoot, internalSecret: GoalsFixture.secret)
            configuration.metricsPort = nil
            configuration.databasePoolSize = 8
            configuration.serviceAddresses = serviceAddresses
            return configuration
        }
    }

    static func configuration(_ service: String, port: Int) -> PendingConfiguration {
        PendingConfiguration(service: service, port: port)
    }

    static func freePort() async throws -> Int { try await freeLoopbackPort(logger: testLogger) }

    static func channel(to port: Int, signedAs caller: String) throws -> RPCChannel {
        try internalChannel(to: port, signedAs: caller, secret: secret, logger: testLogger)
    }

    var goalsInternal: Habitflow_Goals_V1_GoalsInternal.Client {
        Habitflow_Goals_V1_GoalsInternal.Client(transport: goalsInternalChannel)
    }

    var habitsInternal: Habitflow_Habits_V1_HabitsInternal.Client {
        Habitflow_Habits_V1_HabitsInternal.Client(transport: habitsInternalChannel)
    }

    /// Delivers an account event to both services as auth's relay would.
    func deliverAccountEvent(_ payload: some SwiftProtobuf.Message, userID: String) async throws {
        for channel in [goalsInternalChannel, habitsInternalChannel] {
            _ = try await Habitflow_Events_V1_EventSubscriber.Client(transport: channel).deliver(
                .with {
                    $0.event.id = UUID().uuidString.lowercased()
                    $0.event.type = type(of: payload).protoMessageName
                    $0.event.aggregateType = "user"
                    $0.event.aggregateID = userID
                    $0.event.occurredAt = Google_Protobuf_Timestamp(date: Date())
                    $0.event.payload = try payload.serializedData()
                    $0.event.source = "auth"
                })
        }
    }
}

/// A fresh user calling both public APIs through the gateway's credential.
struct TestUser {
    let id = UUID()
    let fixture: GoalsFixture
    let goals: GoalsClient
    let habits: HabitsClient

    init() async throws {
        fixture = try await GoalsFixture.shared.value
        goals = GoalsClient(transport: fixture.goalsChannel)
        habits = HabitsClient(transport: fixture.habitsChannel)
    }

    var options: CallOptions { .onBehalf(of: id) }
    var userID: String { id.uuidString.lowercased() }

    /// Puts this user's "now" at an ISO 8601 instant such as `2026-01-14T12:00:00Z`, in both services.
    func setNow(_ instant: String) throws {
        fixture.clocks.set(try instantFrom(instant), for: id)
    }

    /// Sets the account's time zone in both services, the way auth announces it.
    func setTimeZone(_ zone: String) async throws {
        var event = Habitflow_Events_V1_UserUpdated()
        event.userID = userID
        event.timeZone = zone
        event.updatedAt = Google_Protobuf_Timestamp(date: Date())
        try await fixture.deliverAccountEvent(event, userID: userID)
    }

    func createHabit(_ name: String, unit: String = "") async throws -> Habit {
        try await habits.createHabit(
            .with {
                $0.name = name
                $0.unit = unit
            }, options: options)
    }

    /// Check-ins of `habit` on `date` (the user's today when nil), `count` times, each of `value`.
    func checkIn(_ habit: Habit, on date: Habitflow_Habits_V1_LocalDate? = nil, times count: Int = 1, value: Double? = nil)
        async throws
    {
        for _ in 0..<count {
            _ = try await habits.markHabitDone(
                .with {
                    $0.habitID = habit.id
                    if let date { $0.date = date }
                    if let value { $0.value = value }
                }, options: options)
        }
    }

    /// `count` entries on each of `dates`, in one import.
    func importEntries(_ habit: Habit, dates: [Habitflow_Habits_V1_LocalDate], value: Double = 1) async throws {
        _ = try await fixture.habitsInternal.importEntries(
            .with {
                $0.userID = userID
                $0.entries = dates.map { date in
                    .with {
                        $0.entryID = UUID().uuidString.lowercased()
                        $0.habitID = habit.id
                        $0.date = date
                        $0.value = value
                    }
                }
            })
    }

    func createGoal(
        _ title: String, type: Habitflow_Goals_V1_GoalType, target: Double, horizon: Habitflow_Goals_V1_Horizon = .ongoing,
        habits linked: [Habit] = [], unit: String = "", configure: (inout Habitflow_Goals_V1_CreateGoalRequest) -> Void = { _ in }
    ) async throws -> Goal {
        var request = Habitflow_Goals_V1_CreateGoalRequest()
        request.title = title
        request.type = type
        request.target.value = target
        request.target.unit = unit
        request.horizon = horizon
        request.habitIds = linked.map(\.id)
        configure(&request)
        return try await goals.createGoal(request, options: options)
    }

    func goal(_ goal: Goal) async throws -> Goal {
        try await goals.getGoal(.with { $0.goalID = goal.id }, options: options)
    }

    func history(_ goal: Goal) async throws -> [Habitflow_Goals_V1_GoalWeek] {
        try await goals.getGoalHistory(.with { $0.goalID = goal.id }, options: options).weeks
    }

    func link(_ habit: Habit, to goal: Goal) async throws -> Goal {
        try await goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = habit.id
            }, options: options)
    }

    func unlink(_ habit: Habit, from goal: Goal) async throws -> Goal {
        try await goals.unlinkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = habit.id
            }, options: options)
    }

    func list(_ statuses: [Habitflow_Goals_V1_GoalStatus] = []) async throws -> [Goal] {
        try await goals.listGoals(.with { $0.statuses = statuses }, options: options).goals
    }
}

func date(_ year: Int32, _ month: Int32, _ day: Int32) -> Habitflow_Habits_V1_LocalDate {
    .with {
        $0.year = year
        $0.month = month
        $0.day = day
    }
}

