import Foundation
import HabitFlowAuthProtos
import HabitFlowGateway
import HabitFlowGatewayProtos
import HabitFlowGoalsProtos
import HabitFlowHabitsProtos
import HabitFlowLocking
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceAPI
import HabitFlowServiceKit
import HabitFlowSocialProtos
import HabitFlowStackTestSupport
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

/// `GatewayService/WatchChanges` over the real stack and the test Postgres: change notices from habits, goals and
/// social (NOTIFY at commit), the catch-up from a cursor, heartbeats, and the limits.
@Suite struct WatchChangesTests {
    typealias Response = Habitflow_Gateway_V1_WatchChangesResponse

    /// A stack with a short heartbeat unless a test sets its own.
    static func start(configure: (inout GatewayConfiguration) -> Void = { _ in }) async throws -> TestStack {
        try await TestStack.start { configuration in
            configuration.watchHeartbeatInterval = .seconds(5)
            configure(&configuration)
        }
    }

    struct User {
        let id: String
        let username: String
        let options: CallOptions
    }

    static func register(_ channel: RPCChannel) async throws -> User {
        let (account, registered) = try await GatewayStackTests.register(.init(channel: channel))
        return User(
            id: registered.user.id, username: account.username,
            options: GatewayStackTests.bearer(registered.tokens.accessToken))
    }

    // MARK: Tests

    @Test func aWatcherSeesCheckInsGoalsAndFriendRequestsWithinASecond() async throws {
        let stack = try await Self.start()
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let bob = try await Self.register(channel)
        let habits = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
        let habit = try await habits.createHabit(.with { $0.name = "Read" }, options: alice.options)

        let watch = try await WatchStream.open(channel, user: alice)
        let ready = try await watch.caughtUp()
        // The catch-up was a full sync: the habit made before the watch is in it.
        #expect(ready.changes.flatMap(\.habitIDs).contains(habit.id))
        // Another device of the same user, at the same cursor (the two share their reads).
        let otherDevice = try await WatchStream.open(channel, user: alice, cursor: ready.cursor)
        _ = try await otherDevice.caughtUp()

        let entryID = UUID().uuidString.lowercased()
        var started = ContinuousClock.now
        _ = try await habits.markHabitDone(
            .with {
                $0.habitID = habit.id
                $0.entryID = entryID
            }, options: alice.options)
        let checkIn = try await watch.nextChanges(within: .seconds(1))
        #expect(checkIn.changes.source == .habits)
        #expect(checkIn.entryIDs == [entryID])
        let checkInLatency = ContinuousClock.now - started
        #expect(try await otherDevice.nextChanges(within: .seconds(1)).entryIDs == [entryID])

        started = .now
        let goal = try await Habitflow_Goals_V1_GoalsService.Client(transport: channel).createGoal(
            .with {
                $0.title = "Read 12 books"
                $0.type = .count
                $0.target.value = 12
                $0.horizon = .ongoing
            }, options: alice.options)
        let goalChange = try await watch.nextChanges(within: .seconds(1))
        #expect(goalChange.changes.source == .goals)
        #expect(try goalChange.goalIDs == [goal.id])

        // A change made by another user that concerns this one: bob's friend request reaches alice.
        started = .now
        let request = try await Habitflow_Social_V1_SocialService.Client(transport: channel).sendFriendRequest(
            .with { $0.username = alice.username }, options: bob.options)
        let social = try await watch.nextChanges(within: .seconds(1))
        #expect(social.changes.source == .social)
        #expect(try social.requestIDs == [request.id])
        print("watch delivery: check-in \(checkInLatency), friend request \(ContinuousClock.now - started)")
        // Each change reached the other device once (and nothing else came: the goal and the request are there too).
        #expect(try await otherDevice.nextChanges(within: .seconds(1)).changes.source == .goals)
        #expect(try await otherDevice.nextChanges(within: .seconds(1)).changes.source == .social)
        try await Task.sleep(for: .milliseconds(300))
        #expect(otherDevice.pendingChanges == 0)

        otherDevice.cancel()
        watch.cancel()
        await channel.close()
        await stack.stop()
    }

    @Test func resumingFromACursorSendsExactlyWhatWasMissed() async throws {
        let stack = try await Self.start()
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let habits = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
        let habit = try await habits.createHabit(.with { $0.name = "Run" }, options: alice.options)
        func checkIn(day: Int32) async throws -> String {
            let id = UUID().uuidString.lowercased()
            _ = try await habits.markHabitDone(
                .with {
                    $0.habitID = habit.id
                    $0.entryID = id
                    $0.date = .with {
                        $0.year = 2026
                        $0.month = 1
                        $0.day = day
                    }
                }, options: alice.options)
            return id
        }

        let first = try await WatchStream.open(channel, user: alice)
        let start = try await first.caughtUp().cursor
        let seen = try await checkIn(day: 5)
        let seenEvent = try await first.nextChanges(within: .seconds(2))
        #expect(seenEvent.entryIDs == [seen])
        first.cancel()

        // Made while no watcher is open.
        let missed = [try await checkIn(day: 6), try await checkIn(day: 7)]

        let resumed = try await WatchStream.open(channel, user: alice, cursor: seenEvent.cursor)
        let catchUp = try await resumed.caughtUp()
        #expect(catchUp.changes.flatMap(\.entryIDs) == missed)
        #expect(catchUp.changes.allSatisfy { $0.changes.source == .habits })
        // And live after it, exactly once.
        let live = try await checkIn(day: 8)
        #expect(try await resumed.nextChanges(within: .seconds(2)).entryIDs == [live])
        try await Task.sleep(for: .milliseconds(300))
        #expect(resumed.pendingChanges == 0)
        resumed.cancel()

        // From the cursor of the first catch-up: all four, each once.
        let again = try await WatchStream.open(channel, user: alice, cursor: start)
        #expect(try await again.caughtUp().changes.flatMap(\.entryIDs) == [seen] + missed + [live])
        again.cancel()
        await channel.close()
        await stack.stop()
    }

    /// Each habits replica is restarted in turn, so at some point the one the gateway's notice stream used goes
    /// away: the gateway subscribes again (to the other) and check-ins still arrive. Then the services' own LISTEN
    /// connections are killed: they reconnect and notices flow again.
    @Test func noticesSurviveServiceRestartsAndListenerReconnects() async throws {
        let stack = try await TestStack.start(habitsReplicas: 2)
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let habits = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
        let habit = try await habits.createHabit(.with { $0.name = "Swim" }, options: alice.options)
        let watch = try await WatchStream.open(channel, user: alice)
        _ = try await watch.caughtUp()
        func checkInArrives() async throws {
            let id = UUID().uuidString.lowercased()
            // Retried with the same entry id (idempotent) while the gateway still picks the replica that went away.
            #expect(
                try await eventually {
                    do {
                        _ = try await habits.markHabitDone(
                            .with {
                                $0.habitID = habit.id
                                $0.entryID = id
                            }, options: alice.options)
                        return true
                    } catch let error as RPCError where error.code == .unavailable {
                        return false
                    }
                })
            #expect(try await watch.nextChanges(within: .seconds(3)).entryIDs == [id])
        }

        var replicas = stack.habits
        for index in replicas.indices {
            let port = replicas[index].port
            await replicas[index].shutdown()
            try await checkInArrives()
            replicas[index] = try await TestStack.startHabits(port: port, logger: stack.logger)
            try await Task.sleep(for: .milliseconds(300))
            try await checkInArrives()
        }

        let terminated = try await PostgresAdmin.terminateListeners(channel: "habitflow_changes_habits")
        #expect(terminated >= 2)
        try await Task.sleep(for: .milliseconds(500))
        try await checkInArrives()

        watch.cancel()
        await channel.close()
        await stack.gateway.shutdown()
        await stack.auth.shutdown()
        await stack.goals.shutdown()
        await stack.social.shutdown()
        for host in replicas { await host.shutdown() }
    }

    @Test func aMalformedCursorIsInvalidArgument() async throws {
        let stack = try await Self.start()
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let foreign = PageToken.encode(list: "changes", ["1", "1", UUID().uuidString.lowercased()])
        let badInner = PageToken.encode(list: "watch", ["not a habits cursor", "", ""])
        for cursor in ["garbage!", foreign, String(foreign.dropLast(2)), badInner] {
            let error = await #expect(throws: RPCError.self) {
                let watch = try await WatchStream.open(channel, user: alice, cursor: cursor)
                defer { watch.cancel() }
                _ = try await watch.caughtUp()
            }
            #expect(error?.code == .invalidArgument, "\(cursor)")
            #expect(error?.fieldViolations.map(\.field) == ["cursor"], "\(cursor)")
        }
        await channel.close()
        await stack.stop()
    }

    @Test func heartbeatsCarryTheCursorWhenNothingHappens() async throws {
        let stack = try await Self.start { $0.watchHeartbeatInterval = .milliseconds(200) }
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let watch = try await WatchStream.open(channel, user: alice)
        let ready = try await watch.caughtUp()
        let started = ContinuousClock.now
        for _ in 0..<3 {
            let beat = try await watch.next(within: .seconds(1))
            #expect(beat.event == .heartbeat(Habitflow_Gateway_V1_Heartbeat()))
            #expect(beat.cursor == ready.cursor)
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(500) && elapsed < .seconds(2))
        watch.cancel()
        await channel.close()
        await stack.stop()
    }

    /// A client that stops reading is cut off (`RESOURCE_EXHAUSTED`) once a write waits longer than the limit, and
    /// its watcher is gone: with one watcher allowed per user, a new one is accepted.
    @Test func aSlowWatcherIsCutOffAndFreed() async throws {
        let stack = try await Self.start { configuration in
            // A heartbeat on every turn fills the flow-control windows and the send queue within seconds.
            configuration.watchHeartbeatInterval = .milliseconds(1)
            configuration.watchSlowClientTimeout = .milliseconds(300)
            configuration.watchersPerUser = 1
        }
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let stalled = try stack.gatewayChannel { configuration in
            configuration.http2.initialStreamWindowSize = 65_535
            configuration.http2.connectionWindowSize = 65_535
            configuration.responseQueueHighWatermark = 1
        }
        let responses = try await Habitflow_Gateway_V1_GatewayService.Client(transport: stalled).watchChanges(
            .init(), options: alice.options)
        // The response headers come with the first message, so the gateway has registered this watcher.
        _ = try await responses.initialMetadata()

        // While it is open, a second watcher of the same user is refused.
        let refused = await #expect(throws: RPCError.self) {
            let second = try await WatchStream.open(channel, user: alice)
            defer { second.cancel() }
            _ = try await second.caughtUp()
        }
        #expect(refused?.code == .resourceExhausted)

        // Reading nothing: the gateway gives up on it, and then lets the user open another.
        #expect(
            try await eventually(timeout: .seconds(30)) {
                do {
                    let watch = try await WatchStream.open(channel, user: alice)
                    defer { watch.cancel() }
                    _ = try await watch.caughtUp()
                    return true
                } catch let error as RPCError where error.code == .resourceExhausted {
                    return false
                }
            })
        // What it had queued, then the status.
        let ended = await #expect(throws: RPCError.self) {
            for try await _ in responses {}
        }
        #expect(ended?.code == .resourceExhausted)
        #expect(ended?.message.contains("too slow") == true)
        await stalled.close()
        await channel.close()
        await stack.stop()
    }

    @Test func gatewayShutdownEndsWatchersWithUnavailable() async throws {
        let stack = try await Self.start()
        let channel = try stack.gatewayChannel()
        let alice = try await Self.register(channel)
        let watch = try await WatchStream.open(channel, user: alice)
        _ = try await watch.caughtUp()
        let started = ContinuousClock.now
        await stack.gateway.shutdown()
        // At once, not at the end of the server's grace period.
        #expect(ContinuousClock.now - started < .seconds(5))
        let error = await #expect(throws: RPCError.self) { _ = try await watch.next(within: .seconds(2)) }
        #expect(error?.code == .unavailable)
        await channel.close()
        await stack.stop()
    }
}

// MARK: Helpers

/// A `WatchChanges` stream read in the background, so a test can wait for the next message with a timeout.
final class WatchStream: Sendable {
    typealias Response = Habitflow_Gateway_V1_WatchChangesResponse

    struct Timeout: Error {}
    struct Ended: Error {}

    private let state = Locked<(messages: [Response], end: (any Error)?)>(([], nil))
    private let wakeup = Wakeup()
    private let reader = Locked<Task<Void, Never>?>(nil)

    static func open(_ channel: RPCChannel, user: WatchChangesTests.User, cursor: String = "") async throws
        -> WatchStream
    {
        let responses = try await Habitflow_Gateway_V1_GatewayService.Client(transport: channel).watchChanges(
            .with { $0.cursor = cursor }, options: user.options)
        let stream = WatchStream()
        stream.reader.withLock {
            $0 = Task {
                do {
                    for try await message in responses {
                        stream.state.withLock { $0.messages.append(message) }
                        stream.wakeup.signal()
                    }
                    stream.state.withLock { $0.end = Ended() }
                } catch {
                    stream.state.withLock { $0.end = error }
                }
                stream.wakeup.signal()
            }
        }
        return stream
    }

    func cancel() { reader.withLock { $0?.cancel() } }

    /// Messages received and not taken yet that carry changes.
    var pendingChanges: Int { state.withLock { $0.messages.filter(\.hasChanges).count } }

    func next(within timeout: Duration) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (message, end) = state.withLock { state -> (Response?, (any Error)?) in
                state.messages.isEmpty ? (nil, state.end) : (state.messages.removeFirst(), nil)
            }
            if let message { return message }
            if let end { throw end }
            guard ContinuousClock.now < deadline else { throw Timeout() }
            await wakeup.wait(timeout: deadline - .now)
        }
    }

    /// The next `changes` event, skipping heartbeats.
    func nextChanges(within timeout: Duration) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        while true {
            let message = try await next(within: deadline - .now)
            if message.hasChanges { return message }
        }
    }

    /// The catch-up: the `changes` events up to the `caught_up` heartbeat, and that heartbeat's cursor.
    func caughtUp(within timeout: Duration = .seconds(10)) async throws -> (changes: [Response], cursor: String) {
        let deadline = ContinuousClock.now + timeout
        var changes: [Response] = []
        while true {
            let message = try await next(within: deadline - .now)
            if message.heartbeat.caughtUp { return (changes, message.cursor) }
            if message.hasChanges { changes.append(message) }
        }
    }
}

extension Habitflow_Gateway_V1_WatchChangesResponse {
    var hasChanges: Bool { if case .changes = event { true } else { false } }

    private var habitsPage: Habitflow_Habits_V1_ListChangesResponse {
        guard changes.source == .habits else { return .init() }
        return (try? Habitflow_Habits_V1_ListChangesResponse(unpackingAny: changes.listChanges)) ?? .init()
    }

    var entryIDs: [String] { habitsPage.changes.compactMap { if case .entry(let entry) = $0.resource { entry.id } else { nil } } }
    var habitIDs: [String] { habitsPage.changes.compactMap { if case .habit(let habit) = $0.resource { habit.id } else { nil } } }

    var goalIDs: [String] {
        get throws {
            try Habitflow_Goals_V1_ListChangesResponse(unpackingAny: changes.listChanges).changes.compactMap {
                if case .goal(let goal) = $0.resource { goal.id } else { nil }
            }
        }
    }

    var requestIDs: [String] {
        get throws {
            try Habitflow_Social_V1_ListChangesResponse(unpackingAny: changes.listChanges).changes.compactMap {
                if case .request(let request) = $0.resource { request.id } else { nil }
            }
        }
    }
}

/// The test Postgres as its superuser.
enum PostgresAdmin {
    /// Ends the connections listening on `channel` (the services' listeners), as a network failure would; returns
    /// how many there were.
    static func terminateListeners(channel: String) async throws -> Int {
        let pool = PostgresPool(
            configuration: .init(connectionString: try TestEnvironment.superuserURL()), logger: .init(label: "admin"))
        do {
            let terminated = try await pool.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                WHERE query = \("LISTEN \"\(channel)\"") AND pid <> pg_backend_pid()
                """
            ).map { try $0.decode(0, as: Bool.self) }
            await pool.shutdown()
            return terminated.count
        } catch {
            await pool.shutdown()
            throw error
        }
    }
}
