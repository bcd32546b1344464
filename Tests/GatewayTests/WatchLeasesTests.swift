import Foundation
@testable import HabitFlowGateway
import HabitFlowLocking
import HabitFlowRPC
import HabitFlowTestSupport
import Logging
import Testing

/// ``WatchLeases`` on its own, with each service's `WatchUsers` played by a closure (the end-to-end path, a real
/// service leasing and notifying, is in `WatchChangesTests` and `ServiceKitTests.ChangeNoticeLeaseTests`): what the
/// gateway renews, and which watchers it sends back to read when a lease could not be kept.
@Suite(.timeLimit(.minutes(1)))
struct WatchLeasesTests {
    /// Each service's `WatchUsers` calls (the users of each), answering `answer` (thrown errors fail the call).
    final class FakeLeases: Sendable {
        let calls = Locked<[ChangeFeedSource: [Set<UUID>]]>([:])
        let answer: @Sendable (ChangeFeedSource) throws -> Duration

        init(answer: @escaping @Sendable (ChangeFeedSource) throws -> Duration) {
            self.answer = answer
        }

        var leases: [ChangeFeedSource: WatchLeases.Lease] {
            Dictionary(uniqueKeysWithValues: ChangeFeedSource.allCases.map { source in
                (source, { @Sendable users in
                    self.calls.withLock { $0[source, default: []].append(Set(users)) }
                    return try self.answer(source)
                })
            })
        }
    }

    struct Refused: Error {}

    static let logger = Logger(label: "watch-leases-tests")

    /// A hub with one watcher of a new user, its feeds already read (nothing marked).
    static func watcher(in hub: WatchHub) throws -> Watcher {
        let watcher = Watcher(userID: UUID())
        try hub.register(watcher)
        _ = try watcher.take()
        return watcher
    }

    @Test func aLeaseTheServiceRefusedIsTakenAgainAndThenItsFeedIsRead() async throws {
        let habitsUp = Locked(false)
        let fake = FakeLeases { source in
            if source == .habits, !habitsUp.withLock({ $0 }) { throw Refused() }
            return .seconds(60)
        }
        let hub = WatchHub(limits: .init(perUser: 5, total: 100))
        let leases = WatchLeases(leases: fake.leases, hub: hub)
        let watcher = try Self.watcher(in: hub)
        let keeping = Task { await leases.keep(.habits, logger: Self.logger) }

        await leases.lease(watcher.userID)
        // Goals and social leased it at once: nothing to read again.
        #expect(try watcher.take() == [])
        habitsUp.withLock { $0 = true }
        // Habits answers at the next attempt: what the user changed meanwhile was not notified, so the watcher reads
        // habits' feed again.
        #expect(try await eventually(timeout: .seconds(3)) { try watcher.take() == [.habits] })
        #expect(fake.calls.withLock { $0[.habits]?.last } == [watcher.userID])
        keeping.cancel()
        await keeping.value
    }

    @Test func everyWatchedUserIsRenewedInTimeAndALapseSendsEveryWatcherToRead() async throws {
        let habitsDown = Locked(false)
        let fake = FakeLeases { source in
            if source == .habits, habitsDown.withLock({ $0 }) { throw Refused() }
            return .milliseconds(900)
        }
        let hub = WatchHub(limits: .init(perUser: 5, total: 100))
        let leases = WatchLeases(leases: fake.leases, hub: hub)
        let (first, second) = (try Self.watcher(in: hub), try Self.watcher(in: hub))
        await leases.lease(first.userID)
        await leases.lease(second.userID)
        let keeping = Task { await leases.keep(.habits, logger: Self.logger) }

        // A renewal names every watched user, a third of the way through the 0.9 s lease.
        let both: Set = [first.userID, second.userID]
        #expect(try await eventually(timeout: .seconds(3)) { fake.calls.withLock { $0[.habits]?.last } == both })
        #expect(try first.take() == [])

        // Habits refuses for longer than the lease: once it answers again, every watcher reads habits' feed.
        habitsDown.withLock { $0 = true }
        try await Task.sleep(for: .milliseconds(1_500))
        #expect(try first.take() == [])
        habitsDown.withLock { $0 = false }
        #expect(try await eventually(timeout: .seconds(3)) { try first.take() == [.habits] })
        #expect(try second.take() == [.habits])
        keeping.cancel()
        await keeping.value
    }
}
