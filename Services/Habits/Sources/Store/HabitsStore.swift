public import HabitFlowCalendar
public import Foundation
public import HabitFlowPostgres
internal import HabitFlowCrypto

/// The `habits` schema: every statement the service runs. Handlers validate input; this turns it into SQL.
///
/// Writes run under the user's row lock (``nextChangeSequence(_:user:)``), so a user's writes are serialized: the
/// change feed sees them in order and the per-user limits hold under concurrency.
public struct HabitsStore: Sendable {
    public let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    // MARK: - Users

    /// The user's time zone. A user the service has not seen is created on the spot with the default categories
    /// (zone UTC until an event tells otherwise); a deleted account is refused.
    public func prepareUser(_ userID: UUID, now: Date) async throws -> UserTimeZone {
        if let row = try await pool.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)") {
            return .stored(try row.decode(0, as: String.self))
        }
        let zone = try await pool.transaction { transaction in
            try await createUserIfMissing(transaction, user: userID, zone: nil, zoneChangedAt: nil, now: now)
        }
        guard let zone else { throw HabitsError.accountDeleted(userID) }
        return zone
    }

    /// The user's stored zone and change-sequence value, in one primary-key lookup. A user the service has not seen
    /// is created first (``prepareUser(_:now:)``); a deleted account is refused.
    public func userVersion(_ userID: UUID, now: Date) async throws -> UserVersion {
        if let version = try await storedVersion(userID) { return version }
        _ = try await prepareUser(userID, now: now)
        guard let version = try await storedVersion(userID) else { throw HabitsError.accountDeleted(userID) }
        return version
    }

    private func storedVersion(_ userID: UUID) async throws -> UserVersion? {
        try await pool.queryRow("SELECT time_zone, change_seq FROM users WHERE user_id = \(userID)").map {
            UserVersion(zoneName: try $0.decode(0), changeSequence: try $0.decode(1))
        }
    }

    /// Creates the user with the five default categories unless they exist; then applies `zone` if it is newer
    /// than the zone they have (last write wins by event time). Returns the user's zone, or `nil` when the account
    /// was deleted (nothing is created then).
    @discardableResult
    func createUserIfMissing(
        _ transaction: PostgresTransaction, user userID: UUID, zone: UserTimeZone?, zoneChangedAt: Date?, now: Date
    ) async throws -> UserTimeZone? {
        if try await transaction.queryRow("SELECT 1 FROM deleted_users WHERE user_id = \(userID)") != nil {
            return nil
        }
        let zoneName = zone?.name ?? UserTimeZone.utc.name
        let inserted = try await transaction.execute(
            """
            INSERT INTO users (user_id, time_zone, time_zone_changed_at, created_at) \
            VALUES (\(userID), \(zoneName), \(zoneChangedAt as Date?), \(now)) ON CONFLICT (user_id) DO NOTHING
            """)
        if inserted == 1 {
            let sequence = try await nextChangeSequence(transaction, user: userID)
            let names = HabitRules.defaultCategoryNames
            try await transaction.execute(
                """
                INSERT INTO categories (user_id, id, name, position, is_default, created_at, updated_at, change_seq) \
                SELECT \(userID), d.id, d.name, (d.ordinal - 1)::integer, true, \(now), \(now), \(sequence) \
                FROM unnest(\(names.map { _ in UUID.random() })::uuid[], \(names)::text[]) WITH ORDINALITY AS d(id, name, ordinal)
                """)
            return zone ?? .utc
        }
        if let zone {
            try await applyTimeZone(transaction, user: userID, zone: zone, changedAt: zoneChangedAt ?? now)
        }
        return try await timeZone(transaction, user: userID)
    }

    /// Sets the user's zone unless a later change was applied already. Past entries keep their dates.
    ///
    /// It takes a change-sequence value like every write: the zone decides the user's today and current week, and
    /// cached week views are valid only for the sequence value they were read at.
    func applyTimeZone(_ transaction: PostgresTransaction, user userID: UUID, zone: UserTimeZone, changedAt: Date)
        async throws
    {
        try await transaction.execute(
            """
            UPDATE users SET time_zone = \(zone.name), time_zone_changed_at = \(changedAt), change_seq = change_seq + 1 \
            WHERE user_id = \(userID) AND (time_zone_changed_at IS NULL OR time_zone_changed_at <= \(changedAt))
            """)
    }

    private func timeZone(_ transaction: PostgresTransaction, user userID: UUID) async throws -> UserTimeZone {
        guard let row = try await transaction.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)") else {
            throw HabitsError.accountDeleted(userID)
        }
        return .stored(try row.decode(0, as: String.self))
    }

    /// Removes everything of a user and remembers the account as deleted. Returns whether there was anything.
    ///
    /// The user's row goes with the rest, so no cached week view can match it again (``userVersion(_:now:)`` then
    /// refuses the deleted account), and `deleted_users` keeps the row, and its sequence, from starting over.
    @discardableResult
    public func purgeUser(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Bool {
        let removed = try await transaction.execute("DELETE FROM users WHERE user_id = \(userID)")
        try await transaction.execute(
            "INSERT INTO deleted_users (user_id) VALUES (\(userID)) ON CONFLICT (user_id) DO NOTHING")
        return removed > 0
    }

    /// Takes the user's next change-sequence value, locking the user's row until the transaction ends: every write
    /// starts with this, so one user's writes run one at a time and commit in sequence order.
    func nextChangeSequence(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Int64 {
        guard
            let row = try await transaction.queryRow(
                "UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(userID) RETURNING change_seq")
        else { throw HabitsError.accountDeleted(userID) }
        return try row.decode(0, as: Int64.self)
    }

    /// A write transaction for one user: `body` gets the change-sequence value to stamp on what it touches.
    func write<Result>(
        user userID: UUID, _ body: (PostgresTransaction, Int64) async throws -> Result
    ) async throws -> Result {
        try await pool.transaction { transaction in
            let sequence = try await nextChangeSequence(transaction, user: userID)
            return try await body(transaction, sequence)
        }
    }
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

extension PostgresError {
    /// A unique violation of the named constraint or index.
    func violates(_ constraint: String) -> Bool {
        kind == .uniqueViolation && self.constraint == constraint
    }
}
