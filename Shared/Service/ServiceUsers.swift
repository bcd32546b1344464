public import Foundation
public import HabitFlowCalendar
public import HabitFlowOutbox
public import HabitFlowPostgres

/// The two user tables of every service schema that keeps users' data (habits', goals'; the same shape in each
/// service's first migration): `users` (the user's IANA zone, the event time of its last change, and the change
/// sequence) and `deleted_users` (accounts removed by UserDeleted or PurgeUser: nothing of them is re-created).
///
/// Every write of a service takes the user's next change-sequence value (``nextChangeSequence(_:user:)``), which
/// locks the user's row until commit: one user's writes run one at a time and commit in sequence order (the change
/// feed never skips a row), per-user limits hold under concurrency, and the value is a version of everything of the
/// user's that caches compare with one primary-key lookup.
public struct ServiceUsers: Sendable {
    /// What a service adds for a user it creates (habits: the default categories), in the same transaction.
    public typealias Created = @Sendable (PostgresTransaction, UUID, Date) async throws -> Void

    public let pool: PostgresPool
    private let created: Created?

    public init(pool: PostgresPool, onCreate created: Created? = nil) {
        self.pool = pool
        self.created = created
    }

    /// The user's zone and change-sequence value, in one primary-key lookup. A user the service has not seen is
    /// created on the spot (zone UTC until an event says otherwise); `nil` when the account was deleted.
    public func version(of userID: UUID, now: Date) async throws -> UserVersion? {
        if let version = try await storedVersion(userID) { return version }
        let zone = try await pool.transaction { transaction in
            try await createIfMissing(transaction, user: userID, zone: nil, zoneChangedAt: nil, now: now)
        }
        guard zone != nil else { return nil }
        return try await storedVersion(userID)
    }

    /// Whether the service has the user, has never seen them, or removed their account, in one statement and
    /// without creating anything (for reads that must not make a user, such as an export).
    public func presence(of userID: UUID) async throws -> UserPresence {
        let row = try await pool.queryRow(
            """
            SELECT EXISTS (SELECT FROM users WHERE user_id = \(userID)), \
            EXISTS (SELECT FROM deleted_users WHERE user_id = \(userID))
            """)
        guard let row else { return .unseen }
        if try row.decode(0, as: Bool.self) { return .present }
        return try row.decode(1, as: Bool.self) ? .deleted : .unseen
    }

    private func storedVersion(_ userID: UUID) async throws -> UserVersion? {
        try await pool.queryRow("SELECT time_zone, change_seq FROM users WHERE user_id = \(userID)").map {
            UserVersion(zoneName: try $0.decode(0), changeSequence: try $0.decode(1))
        }
    }

    /// Creates the user unless they exist, then applies `zone` if it is newer than the zone they have (last write
    /// wins by event time). Returns the user's zone, or `nil` when the account was deleted (nothing is created then).
    @discardableResult
    public func createIfMissing(
        _ transaction: PostgresTransaction, user userID: UUID, zone: UserTimeZone?, zoneChangedAt: Date?, now: Date
    ) async throws -> UserTimeZone? {
        if try await transaction.queryRow("SELECT 1 FROM deleted_users WHERE user_id = \(userID)") != nil {
            return nil
        }
        let inserted = try await transaction.execute(
            """
            INSERT INTO users (user_id, time_zone, time_zone_changed_at, created_at) \
            VALUES (\(userID), \((zone ?? .utc).name), \(zoneChangedAt as Date?), \(now)) \
            ON CONFLICT (user_id) DO NOTHING
            """)
        if inserted == 1 {
            try await created?(transaction, userID, now)
            return zone ?? .utc
        }
        if let zone {
            try await applyTimeZone(transaction, user: userID, zone: zone, changedAt: zoneChangedAt ?? now)
        }
        return try await transaction.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)")
            .map { .stored(try $0.decode(0)) }
    }

    /// Sets the user's zone unless a later change was applied already. It takes a change-sequence value like every
    /// write: the zone decides the user's today and current week, so what was cached before is no longer current.
    public func applyTimeZone(_ transaction: PostgresTransaction, user userID: UUID, zone: UserTimeZone, changedAt: Date)
        async throws
    {
        try await transaction.execute(
            """
            UPDATE users SET time_zone = \(zone.name), time_zone_changed_at = \(changedAt), change_seq = change_seq + 1 \
            WHERE user_id = \(userID) AND (time_zone_changed_at IS NULL OR time_zone_changed_at <= \(changedAt))
            """)
    }

    /// Removes the user (their rows in the service's other tables go with it, by cascade) and remembers the account
    /// as deleted. Returns whether there was anything.
    @discardableResult
    public func purge(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Bool {
        let removed = try await transaction.execute("DELETE FROM users WHERE user_id = \(userID)")
        try await transaction.execute(
            "INSERT INTO deleted_users (user_id) VALUES (\(userID)) ON CONFLICT (user_id) DO NOTHING")
        return removed > 0
    }

    /// Takes the user's next change-sequence value, locking the user's row until the transaction ends; `nil` when
    /// the service has no such user.
    public func nextChangeSequence(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Int64? {
        try await transaction.queryRow(
            "UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(userID) RETURNING change_seq"
        )?.decode(0, as: Int64.self)
    }
}

extension ServiceUsers {
    /// Applies one of auth's account events (``EventPayloadReader/accountEvent()``) to these tables.
    public func apply(_ event: AccountEvent, _ transaction: PostgresTransaction, now: Date) async throws {
        switch event {
        case .user(let userID, let zone, let changedAt):
            try await createIfMissing(transaction, user: userID, zone: zone, zoneChangedAt: changedAt, now: now)
        case .deleted(let userID):
            try await purge(transaction, user: userID)
        }
    }
}

/// What a service holds of a user (``ServiceUsers/presence(of:)``).
public enum UserPresence: Sendable, Hashable {
    /// In `users`.
    case present
    /// Never seen: no call or event named the user yet.
    case unseen
    /// Removed by UserDeleted or PurgeUser (in `deleted_users`).
    case deleted
}

/// What a user's cached reads are valid for: the zone and change-sequence value stored with the user. Every write of
/// the service takes the next sequence value in its own transaction, so an equal version means equal data.
public struct UserVersion: Sendable, Hashable {
    /// `users.time_zone` as stored: writes that depend on the zone compare against this.
    public var zoneName: String
    public var changeSequence: Int64

    public init(zoneName: String, changeSequence: Int64) {
        self.zoneName = zoneName
        self.changeSequence = changeSequence
    }

    public var zone: UserTimeZone { .stored(zoneName) }
}
