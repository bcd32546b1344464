internal import Foundation
internal import HabitFlowLocking
internal import HabitFlowRPC
internal import Logging

/// Keeps habits, goals and social notifying the changes of the users this gateway's `WatchChanges` streams watch:
/// a service notifies only users that a subscriber leases (`ChangeNotices/WatchUsers`), so the writes of everyone
/// else cost no `NOTIFY`.
///
/// A stream leases its user in every service before its first read (``lease(_:)``): the service answers once every
/// write in flight for the user has committed, so from then on each change is either notified or already readable.
/// ``keep(_:logger:)`` renews the leases of all watched users a third of the way through the lease. When a lease could
/// not be taken or renewed in time (the service was down), changes made meanwhile may not have been notified: it
/// tries again every ``retryDelay`` and, once the service answers, marks those users' watchers for that service,
/// which then read what they missed.
final class WatchLeases: Sendable {
    /// Leases users in one service (`WatchUsers`), returning how long the leases last.
    typealias Lease = @Sendable (_ users: [UUID]) async throws -> Duration

    private struct Service {
        /// Users whose lease could not be taken (or may have ended): leased again at the next attempt.
        var lapsed: Set<UUID> = []
        /// When the oldest live lease ends, as far as this gateway knows (`nil`: none taken yet).
        var oldestLeaseEnd: ContinuousClock.Instant?
        /// The lease length the service last answered with.
        var leaseLength: Duration = .seconds(60)
    }

    private let leases: [ChangeFeedSource: Lease]
    private let hub: WatchHub
    private let services = Locked<[ChangeFeedSource: Service]>([:])
    private let wakeups: [ChangeFeedSource: Wakeup]

    /// How soon a failed lease is tried again.
    static let retryDelay: Duration = .seconds(1)
    /// Users per `WatchUsers` call (the services take up to 10,000).
    static let usersPerCall = 5_000

    init(leases: [ChangeFeedSource: Lease], hub: WatchHub) {
        self.leases = leases
        self.hub = hub
        self.wakeups = Dictionary(uniqueKeysWithValues: leases.keys.map { ($0, Wakeup()) })
    }

    /// Leases `user` in every service at once. A service that fails is left to ``keep(_:logger:)``, which marks the
    /// user's watchers once it has the lease.
    func lease(_ user: UUID) async {
        await withTaskGroup(of: Void.self) { group in
            for (source, lease) in leases {
                group.addTask { [self] in
                    let sent = ContinuousClock.now
                    do {
                        let length = try await lease([user])
                        leased(source, sent: sent, length: length, renewedAll: false)
                    } catch {
                        services.withLock { _ = $0[source, default: Service()].lapsed.insert(user) }
                        wakeups[source]?.signal()
                    }
                }
            }
        }
    }

    /// Renews `source`'s leases until the task is cancelled.
    func keep(_ source: ChangeFeedSource, logger: Logger) async {
        guard let lease = leases[source], let wakeup = wakeups[source] else { return }
        var renewAt = ContinuousClock.now + services.withLock { $0[source, default: Service()].leaseLength } / 3
        while !Task.isCancelled {
            let renewingAll = ContinuousClock.now >= renewAt
            let lapsed = services.withLock { state in
                defer { state[source, default: Service()].lapsed = [] }
                return state[source, default: Service()].lapsed
            }
            var failed = false
            if renewingAll || !lapsed.isEmpty {
                let users = renewingAll ? lapsed.union(hub.watchedUsers) : lapsed
                let sent = ContinuousClock.now
                do {
                    // With nobody to lease, the last known length stands for the next renewal.
                    var length = services.withLock { $0[source, default: Service()].leaseLength }
                    for chunk in Array(users).chunks(of: Self.usersPerCall) { length = try await lease(Array(chunk)) }
                    let mayHaveLapsed = leased(source, sent: sent, length: length, renewedAll: renewingAll)
                    if mayHaveLapsed {
                        hub.changedAll(in: source)
                    } else {
                        hub.changed(lapsed, in: source)
                    }
                    if renewingAll { renewAt = sent + length / 3 }
                } catch {
                    failed = true
                    services.withLock { $0[source, default: Service()].lapsed.formUnion(lapsed) }
                    if renewingAll { renewAt = ContinuousClock.now + Self.retryDelay }
                    if !Task.isCancelled {
                        logger.warning(
                            "cannot lease watched users' change notices; retrying",
                            metadata: ["service": "\(source.name)", "users": "\(users.count)", "error": "\(error)"])
                    }
                }
            }
            if failed {
                try? await Task.sleep(for: Self.retryDelay)
            } else {
                await wakeup.wait(timeout: max(renewAt - ContinuousClock.now, .zero))
            }
        }
    }

    /// Records a lease the service granted; returns whether a lease may have ended before this one was asked for
    /// (after a renewal of all users: every watcher of the service must then look again).
    @discardableResult
    private func leased(
        _ source: ChangeFeedSource, sent: ContinuousClock.Instant, length: Duration, renewedAll: Bool
    ) -> Bool {
        services.withLock { state in
            var service = state[source, default: Service()]
            defer { state[source] = service }
            let end = sent + length
            let lapsed = service.oldestLeaseEnd.map { sent >= $0 } ?? false
            service.leaseLength = length
            if renewedAll {
                service.oldestLeaseEnd = end
            } else {
                service.oldestLeaseEnd = min(service.oldestLeaseEnd ?? end, end)
            }
            return renewedAll && lapsed
        }
    }
}

extension Array {
    /// The elements in consecutive slices of at most `size`.
    fileprivate func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
