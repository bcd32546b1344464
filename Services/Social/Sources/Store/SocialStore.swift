internal import HabitFlowCalendar
public import Foundation
public import HabitFlowPostgres
public import HabitFlowServiceKit
public import Logging

/// The `social` schema: every statement the service runs. Handlers validate input; this turns it into SQL.
///
/// Writes run under the row locks of the users they touch (``write(user:_:)``, ``write(users:_:_:)``), so each
/// user's writes are serialized: the change feed sees them in order, and the limits (100 friends, 100 pending
/// requests, one partner) hold under concurrency.
public struct SocialStore: Sendable {
    public let pool: PostgresPool
    /// Where a transaction run again after a deadlock is noted.
    let logger: Logger

    public init(pool: PostgresPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    // MARK: - Users

    /// The `users` and `deleted_users` tables.
    var users: ServiceUsers { ServiceUsers(pool: pool) }

    /// The user's zone and change-sequence value. A user the service has not seen is created on the spot (zone UTC
    /// until an event tells otherwise); a deleted account is refused.
    public func userVersion(_ userID: UUID, now: Date) async throws -> UserVersion {
        guard let version = try await users.version(of: userID, now: now) else {
            throw SocialError.accountDeleted(userID)
        }
        return version
    }

    /// A write transaction for one user: `body` gets the change-sequence value to stamp on what it touches (taking
    /// it locks the user's row until commit).
    func write<Result>(
        user userID: UUID, _ body: (PostgresTransaction, Int64) async throws -> Result
    ) async throws -> Result {
        try await pool.transaction { transaction in
            guard let sequence = try await users.nextChangeSequence(transaction, user: userID) else {
                throw SocialError.accountDeleted(userID)
            }
            return try await body(transaction, sequence)
        }
    }

    /// A write transaction touching two users: `body` gets each one's change-sequence value. The rows are locked
    /// the smaller id first, so two writes on the same pair never wait on each other crosswise. `other` is created
    /// when the service has not seen them yet; a deleted account (either one) is refused.
    func write<Result>(
        users userID: UUID, _ otherID: UUID, now: Date,
        _ body: (PostgresTransaction, _ userSequence: Int64, _ otherSequence: Int64) async throws -> Result
    ) async throws -> Result {
        try await pool.transaction { transaction in
            guard try await users.createIfMissing(
                transaction, user: otherID, zone: nil, zoneChangedAt: nil, now: now) != nil
            else { throw SocialError.accountDeleted(otherID) }
            let userFirst = userID.uuidString < otherID.uuidString
            var sequences: [Int64] = []
            for id in userFirst ? [userID, otherID] : [otherID, userID] {
                guard let sequence = try await users.nextChangeSequence(transaction, user: id) else {
                    throw SocialError.accountDeleted(id)
                }
                sequences.append(sequence)
            }
            return try await body(
                transaction, userFirst ? sequences[0] : sequences[1], userFirst ? sequences[1] : sequences[0])
        }
    }
}

extension PostgresError {
    /// A unique violation of the named constraint or index.
    func violates(_ constraint: String) -> Bool {
        kind == .uniqueViolation && self.constraint == constraint
    }
}
