internal import Foundation
internal import HabitFlowPostgres

/// Blocks: the users a user blocked, with their names as they were then. Unblocking tombstones the row.
extension SocialStore {
    /// Whether `userID` blocks `otherID` now.
    func hasBlocked(_ db: some PostgresQueryable, _ userID: UUID, _ otherID: UUID) async throws -> Bool {
        try await db.queryRow(
            "SELECT 1 FROM blocks WHERE user_id = \(userID) AND blocked_id = \(otherID) AND deleted_at IS NULL"
        ) != nil
    }

    /// Blocks `person`: ends the friendship, the partnership and every pending request between them. Blocking again
    /// returns the block as it is.
    func block(_ userID: UUID, _ person: PersonRecord, now: Date) async throws -> BlockRecord {
        try await write(users: userID, person.id, now: now) { transaction, userSequence, otherSequence in
            try await rememberNames(transaction, person)
            if let existing = try await transaction.queryRow(
                """
                SELECT * FROM blocks WHERE user_id = \(userID) AND blocked_id = \(person.id) AND deleted_at IS NULL
                """)
            {
                return try BlockRecord(row: existing)
            }
            let row = try await transaction.queryRow(
                """
                INSERT INTO blocks (user_id, blocked_id, username, display_name, created_at, change_seq) \
                VALUES (\(userID), \(person.id), \(person.username), \(person.displayName), \(now), \(userSequence)) \
                ON CONFLICT (user_id, blocked_id) DO UPDATE SET username = EXCLUDED.username, \
                display_name = EXCLUDED.display_name, created_at = EXCLUDED.created_at, deleted_at = NULL, \
                change_seq = EXCLUDED.change_seq RETURNING *
                """)
            try await unfriend(
                transaction, userID, person.id, userSequence: userSequence, otherSequence: otherSequence, now: now)
            try await cancelRequests(
                transaction, between: userID, person.id, userSequence: userSequence, otherSequence: otherSequence,
                now: now)
            return try BlockRecord(row: try required(row))
        }
    }

    /// Lifts a block (tombstones it); nothing to do when there is none.
    func unblock(_ userID: UUID, _ otherID: UUID, now: Date) async throws {
        guard try await hasBlocked(pool, userID, otherID) else { return }
        _ = try await write(user: userID) { transaction, sequence in
            try await transaction.execute(
                """
                UPDATE blocks SET deleted_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND blocked_id = \(otherID) AND deleted_at IS NULL
                """)
        }
    }

    /// A page of the users the user blocks, the latest block first.
    func blocks(of userID: UUID, offset: Int, limit: Int) async throws -> [BlockRecord] {
        try await pool.query(
            """
            SELECT * FROM blocks WHERE user_id = \(userID) AND deleted_at IS NULL \
            ORDER BY created_at DESC, blocked_id OFFSET \(offset) LIMIT \(limit)
            """
        ).map(BlockRecord.init(row:))
    }
}
