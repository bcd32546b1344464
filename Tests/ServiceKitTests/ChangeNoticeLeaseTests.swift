import Foundation
import HabitFlowEvents
import HabitFlowLocking
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import HabitFlowTestSupport
import Testing

/// `ChangeNotices/WatchUsers`: a write notifies only users that a subscriber leases, for as long as the lease lasts,
/// and a lease that starts answers only after the user's write in flight has committed. In the habits schema, with
/// rows of its `users` table made here (the change-notice trigger is on `users.change_seq`).
@Suite(.timeLimit(.minutes(1)))
struct ChangeNoticeLeaseTests {
    /// A host serving the change notices with a two-second lease, its pool and a subscriber's client.
    static func start() async throws -> (ServiceHost, PostgresPool, Habitflow_Events_V1_ChangeNotices.Client) {
        let host = try await startHost(
            ServiceDefinition(name: "habits") { runtime in
                [ChangeNoticesService(runtime: runtime, watchLease: .seconds(2))]
            }, databaseURL: try TestEnvironment.serviceURL("habits"))
        let rpc = try channel(to: host, signedWith: "kit-secret", caller: "gateway-watch")
        return (host, host.runtime.pool, Habitflow_Events_V1_ChangeNotices.Client(transport: rpc))
    }

    /// A user row of its own, which `write` then changes as every habits write does (its change sequence).
    static func newUser(_ pool: PostgresPool) async throws -> UUID {
        let user = UUID()
        try await pool.execute("INSERT INTO users (user_id) VALUES (\(user))")
        return user
    }

    static func write(_ pool: PostgresPool, _ user: UUID) async throws {
        try await pool.execute("UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(user)")
    }

    static func cleanUp(_ pool: PostgresPool, _ users: [UUID]) async throws {
        try await pool.execute("DELETE FROM change_watches WHERE user_id = ANY(\(users))")
        try await pool.execute("DELETE FROM users WHERE user_id = ANY(\(users))")
    }

    /// Reads notices until one names `awaited`; returns every user named on the way.
    static func users(
        until awaited: UUID, in notices: inout ResponseStream<Habitflow_Events_V1_ChangedUsers>.AsyncIterator
    ) async throws -> Set<String> {
        var seen: Set<String> = []
        while let notice = try await notices.next() {
            seen.formUnion(notice.userIds)
            if seen.contains(awaited.uuidString.lowercased()) { return seen }
        }
        Issue.record("the notice stream ended before \(awaited) was named")
        return seen
    }

    @Test func aWriteNotifiesOnlyLeasedUsersAndOnlyWhileTheLeaseLasts() async throws {
        let (host, pool, client) = try await Self.start()
        let unwatched = try await Self.newUser(pool)
        let watched = try await Self.newUser(pool)
        let later = try await Self.newUser(pool)
        let stream = try await client.watchChangedUsers(Habitflow_Events_V1_WatchChangedUsersRequest())
        var notices = stream.makeAsyncIterator()
        #expect(try await notices.next()?.allUsers == true)

        let lease = try await client.watchUsers(.with { $0.userIds = [watched.uuidString] })
        #expect(lease.leaseSeconds == 2)
        // The unwatched user's write commits first: had it notified, its notice would come before the watched one's.
        try await Self.write(pool, unwatched)
        try await Self.write(pool, watched)
        let seen = try await Self.users(until: watched, in: &notices)
        #expect(!seen.contains(unwatched.uuidString.lowercased()))

        // Once the lease has ended, the watched user's writes are not notified any more.
        try await Task.sleep(for: .milliseconds(2_500))
        try await Self.write(pool, watched)
        _ = try await client.watchUsers(.with { $0.userIds = [later.uuidString] })
        try await Self.write(pool, later)
        let afterExpiry = try await Self.users(until: later, in: &notices)
        #expect(!afterExpiry.contains(watched.uuidString.lowercased()))

        stream.cancel()
        try await Self.cleanUp(pool, [unwatched, watched, later])
        await host.shutdown()
    }

    @Test func aStartingLeaseAnswersAfterTheUsersWriteInFlightCommits() async throws {
        let (host, pool, client) = try await Self.start()
        let user = try await Self.newUser(pool)
        let committing = Locked(false)
        // A write holds the user's row lock: its trigger looked for a lease before there was one.
        let writeStarted = Wakeup()
        let write = Task {
            try await pool.transaction { transaction in
                try await transaction.execute("UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(user)")
                writeStarted.signal()
                try await Task.sleep(for: .milliseconds(700))
                committing.withLock { $0 = true }
            }
        }
        await writeStarted.wait()
        _ = try await client.watchUsers(.with { $0.userIds = [user.uuidString] })
        // The answer came after the write committed, so a read made now sees it.
        #expect(committing.withLock { $0 })
        let sequence = try await pool.queryRow("SELECT change_seq FROM users WHERE user_id = \(user)")
        #expect(try sequence?.decode(0, as: Int64.self) == 1)
        try await write.value

        // A renewal while the lease lives does not wait for writes.
        let renewal = Task {
            try await pool.transaction { transaction in
                try await transaction.execute("UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(user)")
                try await Task.sleep(for: .seconds(5))
            }
        }
        let started = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(200))
        _ = try await client.watchUsers(.with { $0.userIds = [user.uuidString] })
        #expect(ContinuousClock.now - started < .seconds(3))
        try await renewal.value
        try await Self.cleanUp(pool, [user])
        await host.shutdown()
    }

    @Test func malformedOrTooManyUserIDsAreInvalidArgument() async throws {
        let (host, _, client) = try await Self.start()
        await #expect {
            _ = try await client.watchUsers(.with { $0.userIds = [UUID().uuidString, "not-a-uuid"] })
        } throws: { error in
            let error = try #require(error as? RPCError)
            return error.code == .invalidArgument && error.fieldViolations.map(\.field) == ["user_ids[1]"]
        }
        await #expect {
            _ = try await client.watchUsers(.with {
                $0.userIds = (0...ChangeNoticesService.maximumWatchedUsersPerCall).map { _ in UUID().uuidString }
            })
        } throws: { error in
            let error = try #require(error as? RPCError)
            return error.code == .invalidArgument && error.fieldViolations.map(\.field) == ["user_ids"]
        }
        await host.shutdown()
    }
}
