internal import Foundation
public import HabitFlowEvents
internal import HabitFlowLocking
internal import HabitFlowOutbox
internal import HabitFlowPostgres
public import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import Logging

/// `habitflow.events.v1.ChangeNotices`: tells the gateway which users' data changed, as writes commit, so it can push
/// their changes to their watchers (`GatewayService/WatchChanges`). Habits, goals and social serve it; auth serves it
/// for users whose sessions ended (its `0003_session_end_notices.sql`), which the gateway's session checks follow.
///
/// The service's migration `NNNN_change_notices.sql` makes Postgres `NOTIFY` the user id on
/// `ChangeNoticeMigrations.channel(schema:)` whenever a write bumps the user's change sequence; the process's one
/// `LISTEN` connection (``ServiceNotifications``) feeds every subscriber. Each subscriber has a set of pending user ids and a
/// flag, not a queue: a user who changed ten times while the subscriber was writing is sent once, and a subscriber
/// that falls more than ``maximumPendingUsers`` behind gets `all_users` instead, so memory stays bounded whatever
/// the write rate. `all_users` also goes to every subscriber whenever the listener (re)connects, since notifications
/// sent while it was disconnected are lost, and opens every stream. A stream opens only while the listener listens,
/// and every stream ends when it loses its connection: an open stream means no notice is being missed (the
/// gateway's session checks rely on that), and the subscriber comes back for a fresh `all_users`.
///
/// Habits, goals and social notify only the users a subscriber leases with `WatchUsers` (``Notified/watchedUsers``):
/// the gateway leases the users of its open `WatchChanges` streams, so the many writes of users nobody watches cost
/// no `NOTIFY`, which Postgres 15 delivers by waking every listening connection of the database. The leases live in
/// the schema's `change_watches` (library migration `changes/0003`), shared by all replicas and all subscribers.
public final class ChangeNoticesService: Habitflow_Events_V1_ChangeNotices.Handler, Sendable {
    /// Whose changes the schema's triggers notify.
    public enum Notified: Sendable {
        /// Users with a live `WatchUsers` lease. Every write locks the user's row in `users` (by `user_id`) before
        /// its trigger looks for the lease, as habits', goals' and social's do when they take the change sequence.
        case watchedUsers
        /// Every user (auth's session ends, which the gateway's session checks follow for everyone): `WatchUsers`
        /// stores nothing.
        case everyUser
    }

    /// Distinct users a subscriber's next message may name; beyond, it says `all_users`.
    public static let maximumPendingUsers = 10_000
    /// User ids one `WatchUsers` call may lease.
    public static let maximumWatchedUsersPerCall = 10_000
    /// How long a `WatchUsers` lease lasts (the gateway renews a third of the way through).
    public static let defaultWatchLease: Duration = .seconds(120)

    private let subscribers = Locked<(next: Int, all: [Int: Subscriber], draining: Bool, listening: Bool)>(
        (0, [:], false, false))
    private let notified: Notified
    private let watchLease: Duration
    private let pool: PostgresPool

    /// Listens (over the runtime's shared connection, for as long as the service runs) on the channel of the
    /// runtime's schema, and ends the subscribers' streams when a graceful shutdown begins.
    public init(runtime: ServiceRuntime, notified: Notified = .watchedUsers, watchLease: Duration = defaultWatchLease) {
        self.notified = notified
        self.watchLease = watchLease
        self.pool = runtime.pool
        // Published on the listener's thread: a write's notice reaches the subscribers' tasks with one wake-up.
        runtime.notifications.listen(on: ChangeNoticeMigrations.channel(schema: runtime.configuration.name)) {
            [self] event in publish(event)
        }
        runtime.onDrain { [self] in drain() }
    }

    /// Hands a listener event to every subscriber.
    func publish(_ event: PostgresNotificationListener.Event) {
        let subscribers = self.subscribers.withLock { state in
            switch event {
            case .listening: state.listening = true
            case .lost: state.listening = false
            case .notification: break
            }
            return Array(state.all.values)
        }
        for subscriber in subscribers {
            switch event {
            case .listening: subscriber.markAll()
            case .lost: subscriber.end()
            case .notification(let notification): subscriber.mark(notification.payload)
            }
        }
    }

    /// Ends every stream (each returns OK; the gateway subscribes again elsewhere) and refuses new ones.
    private func drain() {
        let subscribers = self.subscribers.withLock { state in
            state.draining = true
            return Array(state.all.values)
        }
        for subscriber in subscribers { subscriber.end() }
    }

    public func watchChangedUsers(
        request: Habitflow_Events_V1_WatchChangedUsersRequest,
        responses: ResponseWriter<Habitflow_Events_V1_ChangedUsers>, context: ServerContext
    ) async throws {
        let subscriber = Subscriber()
        let id = subscribers.withLock { state -> Int? in
            guard !state.draining else { return nil }
            state.next += 1
            state.all[state.next] = subscriber
            return state.next
        }
        guard let id else { throw RPCError(.unavailable, "the service is shutting down; subscribe again") }
        defer { _ = subscribers.withLock { $0.all.removeValue(forKey: id) } }
        while !Task.isCancelled {
            // Nothing, not even the opening `all_users`, before the listener listens (``publish(_:)`` wakes us).
            guard subscribers.withLock({ $0.listening }) else {
                if subscriber.isEnded { return }
                await subscriber.wakeup.wait(timeout: .milliseconds(100))
                continue
            }
            switch subscriber.take() {
            case .ended: return
            case .notice(let notice): try await responses.write(notice)
            case .nothing: await subscriber.wakeup.wait()
            }
        }
    }

    public func watchUsers(request: Habitflow_Events_V1_WatchUsersRequest, context: ServerContext) async throws
        -> Habitflow_Events_V1_WatchUsersResponse
    {
        var validator = RequestValidator()
        if request.userIds.count > Self.maximumWatchedUsersPerCall {
            validator.reject("user_ids", "at most \(Self.maximumWatchedUsersPerCall) per call")
        }
        let users = Set(request.userIds.enumerated().map { validator.id($1, field: "user_ids[\($0)]") })
        try validator.check()
        let leaseSeconds = watchLease.components.seconds
        let response = Habitflow_Events_V1_WatchUsersResponse.with { $0.leaseSeconds = Int32(leaseSeconds) }
        guard case .watchedUsers = notified, !users.isEmpty else { return response }
        // One statement: extend or start the leases, sweep the ended ones of other users, and name the users whose
        // lease starts now (it had ended, or there was none).
        let started = try await pool.query(
            """
            WITH requested AS (SELECT unnest(\(Array(users))::uuid[]) AS user_id), \
            previous AS (SELECT user_id, expires_at FROM change_watches \
                WHERE user_id IN (SELECT user_id FROM requested)), \
            swept AS (DELETE FROM change_watches WHERE expires_at < now() \
                AND user_id NOT IN (SELECT user_id FROM requested)), \
            leased AS (INSERT INTO change_watches (user_id, expires_at) \
                SELECT user_id, now() + \(leaseSeconds) * interval '1 second' FROM requested \
                ON CONFLICT (user_id) DO UPDATE \
                SET expires_at = GREATEST(change_watches.expires_at, EXCLUDED.expires_at) RETURNING user_id) \
            SELECT leased.user_id FROM leased LEFT JOIN previous USING (user_id) \
            WHERE previous.expires_at IS NULL OR previous.expires_at <= now()
            """)
        // A write whose trigger looked before the lease committed still holds the user's row lock: waiting for it
        // (one row at a time, so no lock is held while waiting for another) means the caller's next read sees it.
        for row in started {
            let user = try row.decode(0, as: UUID.self)
            _ = try await pool.query("SELECT 1 FROM users WHERE user_id = \(user) FOR SHARE")
        }
        return response
    }

    /// One stream's pending notice.
    private final class Subscriber: Sendable {
        enum Next {
            case notice(Habitflow_Events_V1_ChangedUsers)
            case nothing
            case ended
        }

        let wakeup = Wakeup()
        /// Starts with `all`: the first message opens the stream.
        private let pending = Locked<(users: Set<String>, all: Bool, ended: Bool)>(([], true, false))

        func mark(_ userID: String) {
            pending.withLock { pending in
                guard !pending.all else { return }
                if pending.users.count < ChangeNoticesService.maximumPendingUsers {
                    pending.users.insert(userID)
                } else {
                    pending = ([], true, pending.ended)
                }
            }
            wakeup.signal()
        }

        func markAll() {
            pending.withLock { $0 = ([], true, $0.ended) }
            wakeup.signal()
        }

        var isEnded: Bool { pending.withLock { $0.ended } }

        func end() {
            pending.withLock { $0.ended = true }
            wakeup.signal()
        }

        func take() -> Next {
            pending.withLock { pending in
                if pending.ended { return .ended }
                guard pending.all || !pending.users.isEmpty else { return .nothing }
                let notice = Habitflow_Events_V1_ChangedUsers.with {
                    $0.allUsers = pending.all
                    $0.userIds = pending.users.sorted()
                }
                pending = ([], false, false)
                return .notice(notice)
            }
        }
    }
}
