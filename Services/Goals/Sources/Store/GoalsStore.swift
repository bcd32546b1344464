internal import HabitFlowCalendar
public import Foundation
public import HabitFlowPostgres
public import HabitFlowServiceKit

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

    /// The `users` and `deleted_users` tables.
    var users: ServiceUsers { ServiceUsers(pool: pool) }

    /// The user's zone and change-sequence value, in one primary-key lookup. A user the service has not seen is
    /// created on the spot (zone UTC until an event tells otherwise); a deleted account is refused.
    public func userVersion(_ userID: UUID, now: Date) async throws -> UserVersion {
        guard let version = try await users.version(of: userID, now: now) else {
            throw GoalsError.accountDeleted(userID)
        }
        return version
    }

    /// Removes everything of a user and remembers the account as deleted. Returns whether there was anything.
    public func purgeUser(_ userID: UUID) async throws -> Bool {
        try await pool.transaction { try await users.purge($0, user: userID) }
    }

    /// A write transaction for one user: `body` gets the change-sequence value to stamp on what it touches (taking
    /// it locks the user's row until commit).
    func write<Result>(
        user userID: UUID, _ body: (PostgresTransaction, Int64) async throws -> Result
    ) async throws -> Result {
        try await pool.transaction { transaction in
            try await lockLowerPartners(transaction, of: userID)
            guard let sequence = try await users.nextChangeSequence(transaction, user: userID) else {
                throw GoalsError.accountDeleted(userID)
            }
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
