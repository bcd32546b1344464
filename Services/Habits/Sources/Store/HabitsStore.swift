public import HabitFlowCalendar
public import Foundation
public import HabitFlowPostgres
public import HabitFlowServiceKit
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

    /// The `users` and `deleted_users` tables; a user is created with the five default categories.
    var users: ServiceUsers {
        ServiceUsers(pool: pool) { transaction, userID, now in
            let sequence = try await nextChangeSequence(transaction, user: userID)
            let names = HabitRules.defaultCategoryNames
            try await transaction.execute(
                """
                INSERT INTO categories (user_id, id, name, position, is_default, created_at, updated_at, change_seq) \
                SELECT \(userID), d.id, d.name, (d.ordinal - 1)::integer, true, \(now), \(now), \(sequence) \
                FROM unnest(\(names.map { _ in UUID.random() })::uuid[], \(names)::text[]) WITH ORDINALITY AS d(id, name, ordinal)
                """)
        }
    }

    /// The user's time zone. A user the service has not seen is created on the spot with the default categories
    /// (zone UTC until an event tells otherwise); a deleted account is refused.
    public func prepareUser(_ userID: UUID, now: Date) async throws -> UserTimeZone {
        try await userVersion(userID, now: now).zone
    }

    /// The user's stored zone and change-sequence value, in one primary-key lookup. A user the service has not seen
    /// is created first; a deleted account is refused.
    public func userVersion(_ userID: UUID, now: Date) async throws -> UserVersion {
        guard let version = try await users.version(of: userID, now: now) else {
            throw HabitsError.accountDeleted(userID)
        }
        return version
    }

    /// A read of one user's rows joined to the user's own row (`FROM users u LEFT JOIN … WHERE u.user_id = …`,
    /// selecting only the joined table's columns), so that one statement both reads and shows that the service knows
    /// the user: `nil` when it does not (no row at all), empty when the join found nothing (one row without an `id`).
    /// Most reads come from known users; this spares them the separate lookup of ``userVersion(_:now:)``.
    func knownUserRows<Record>(
        _ query: PostgresQuery, _ record: (PostgresRow) throws -> Record
    ) async throws -> [Record]? {
        try await knownUserRows(query, user: { _ in }, record)?.records
    }

    /// ``knownUserRows(_:_:)`` that also selects columns of the user's own row: `user` decodes them from the first row.
    func knownUserRows<User, Record>(
        _ query: PostgresQuery, user: (PostgresRow) throws -> User, _ record: (PostgresRow) throws -> Record
    ) async throws -> (user: User, records: [Record])? {
        let rows = try await pool.query(query)
        guard let first = rows.first else { return nil }
        let user = try user(first)
        if rows.count == 1, try first.decode("id", as: UUID?.self) == nil { return (user, []) }
        return (user, try rows.map(record))
    }

    /// Whether the service holds the user, without creating them: `false` for a user it has never seen; a deleted
    /// account is refused.
    public func knowsUser(_ userID: UUID) async throws -> Bool {
        switch try await users.presence(of: userID) {
        case .present: return true
        case .unseen: return false
        case .deleted: throw HabitsError.accountDeleted(userID)
        }
    }

    /// Removes everything of a user and remembers the account as deleted. Returns whether there was anything.
    ///
    /// The user's row goes with the rest, so no cached week view can match it again (``userVersion(_:now:)`` then
    /// refuses the deleted account), and `deleted_users` keeps the row, and its sequence, from starting over.
    @discardableResult
    public func purgeUser(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Bool {
        try await users.purge(transaction, user: userID)
    }

    /// Takes the user's next change-sequence value, locking the user's row until the transaction ends: every write
    /// starts with this, so one user's writes run one at a time and commit in sequence order.
    func nextChangeSequence(_ transaction: PostgresTransaction, user userID: UUID) async throws -> Int64 {
        guard let sequence = try await users.nextChangeSequence(transaction, user: userID) else {
            throw HabitsError.accountDeleted(userID)
        }
        return sequence
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

extension PostgresError {
    /// A unique violation of the named constraint or index.
    func violates(_ constraint: String) -> Bool {
        kind == .uniqueViolation && self.constraint == constraint
    }
}
