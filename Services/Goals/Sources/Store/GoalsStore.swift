public import HabitFlowCalendar
public import Foundation
public import HabitFlowPostgres

/// The `goals` schema: every statement the service runs. Handlers validate input; this turns it into SQL.
///
/// Writes run under the user's row lock (``write(user:_:)``), so a user's writes are serialized: the change feed sees
/// them in order, the limit of active goals holds under concurrency, and the user's change-sequence value tells
/// cached progress whether it is current.
public struct GoalsStore: Sendable {
    public let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    // MARK: - Users

    /// The user's zone and change-sequence value, in one primary-key lookup. A user the service has not seen is
    /// created on the spot (zone UTC until an event tells otherwise); a deleted account is refused.
    public func userVersion(_ userID: UUID, now: Date) async throws -> UserVersion {
        if let version = try await storedVersion(userID) { return version }
        let created = try await pool.transaction { transaction in
            try await createUserIfMissing(transaction, user: userID, zone: nil, zoneChangedAt: nil, now: now)
        }
        guard created != nil, let version = try await storedVersion(userID) else {
            throw GoalsError.accountDeleted(userID)
        }
        return version
    }

    private func storedVersion(_ userID: UUID) async throws -> UserVersion? {
        try await pool.queryRow("SELECT time_zone, change_seq FROM users WHERE user_id = \(userID)").map {
            UserVersion(zone: .stored(try $0.decode(0)), changeSequence: try $0.decode(1))
        }
    }

    /// Creates the user unless they exist, then applies `zone` if it is newer than the zone they have (last write
    /// wins by event time). Returns the user's zone, or `nil` when the account was deleted (nothing is created then).
    @discardableResult
    func createUserIfMissing(
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
        if inserted == 0, let zone {
            // The zone decides the user's today and current week, so a change takes a sequence value: cached
            // progress read before it is no longer current.
            try await transaction.execute(
                """
                UPDATE users SET time_zone = \(zone.name), time_zone_changed_at = \(zoneChangedAt ?? now), \
                change_seq = change_seq + 1 WHERE user_id = \(userID) \
                AND (time_zone_changed_at IS NULL OR time_zone_changed_at <= \(zoneChangedAt ?? now))
                """)
        }
        return try await transaction.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)")
            .map { .stored(try $0.decode(0)) }
    }

    /// Removes everything of a user and remembers the account as deleted. Returns whether there was anything.
    @discardableResult
    public func purgeUser(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Bool {
        let removed = try await transaction.execute("DELETE FROM users WHERE user_id = \(userID)")
        try await transaction.execute(
            "INSERT INTO deleted_users (user_id) VALUES (\(userID)) ON CONFLICT (user_id) DO NOTHING")
        return removed > 0
    }

    public func purgeUser(_ userID: UUID) async throws -> Bool {
        try await pool.transaction { try await purgeUser($0, user: userID) }
    }

    /// A write transaction for one user: `body` gets the change-sequence value to stamp on what it touches. Taking
    /// it locks the user's row until commit, so one user's writes run one at a time and commit in sequence order.
    func write<Result>(
        user userID: UUID, _ body: (PostgresTransaction, Int64) async throws -> Result
    ) async throws -> Result {
        try await pool.transaction { transaction in
            guard
                let row = try await transaction.queryRow(
                    "UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(userID) RETURNING change_seq")
            else { throw GoalsError.accountDeleted(userID) }
            return try await body(transaction, try row.decode(0, as: Int64.self))
        }
    }
}

/// What a user's cached progress is valid for: the zone and change-sequence value stored with the user. Every write
/// of the service takes the next sequence value, so an equal version means equal goals, links and assessments.
public struct UserVersion: Sendable, Hashable {
    public var zone: UserTimeZone
    public var changeSequence: Int64

    public init(zone: UserTimeZone, changeSequence: Int64) {
        self.zone = zone
        self.changeSequence = changeSequence
    }
}

extension PostgresError {
    /// A unique violation of the named constraint or index.
    func violates(_ constraint: String) -> Bool {
        kind == .uniqueViolation && self.constraint == constraint
    }
}
