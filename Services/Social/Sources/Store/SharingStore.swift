internal import Foundation
internal import HabitFlowPostgres

/// The `sharing_settings` and `deleted_categories` tables: what each user shares with their friends.
extension SocialStore {
    /// The user's settings; the defaults while they never changed any.
    func sharingSettings(of userID: UUID) async throws -> SharingSettings {
        try await pool.queryRow(
            """
            SELECT share_weekly_score, private_mode, shared_category_ids, updated_at \
            FROM sharing_settings WHERE user_id = \(userID)
            """
        ).map(Self.sharingSettings) ?? .defaults
    }

    /// Applies `changes` (last write wins per field) and returns the settings after them, stamped with the user's
    /// next change-sequence value for the change feed. A category habits deleted meanwhile (its CategoryDeleted came
    /// after the caller's check with habits; ``categoryDeleted(_:user:category:now:)`` remembers it) is refused as not
    /// found, so a deleted category is not shared.
    func updateSharingSettings(user userID: UUID, _ changes: SharingChanges, now: Date) async throws
        -> SharingSettings
    {
        try await write(user: userID) { transaction, sequence in
            if let categoryIDs = changes.sharedCategoryIDs, !categoryIDs.isEmpty {
                let deleted = try await transaction.query(
                    """
                    SELECT category_id FROM deleted_categories \
                    WHERE user_id = \(userID) AND category_id = ANY(\(categoryIDs)::uuid[])
                    """
                ).map { try $0.decode(0, as: UUID.self) }
                if let first = categoryIDs.first(where: Set(deleted).contains) {
                    throw SharingError.categoryNotFound(first)
                }
            }
            let row = try await transaction.queryRow(
                """
                INSERT INTO sharing_settings AS s \
                (user_id, share_weekly_score, private_mode, shared_category_ids, updated_at, change_seq) \
                VALUES (\(userID), coalesce(\(changes.shareWeeklyScore as Bool?)::boolean, true), \
                coalesce(\(changes.privateMode as Bool?)::boolean, false), \
                coalesce(\(changes.sharedCategoryIDs as [UUID]?)::uuid[], '{}'::uuid[]), \(now), \(sequence)) \
                ON CONFLICT (user_id) DO UPDATE SET \
                share_weekly_score = coalesce(\(changes.shareWeeklyScore as Bool?)::boolean, s.share_weekly_score), \
                private_mode = coalesce(\(changes.privateMode as Bool?)::boolean, s.private_mode), \
                shared_category_ids = \
                coalesce(\(changes.sharedCategoryIDs as [UUID]?)::uuid[], s.shared_category_ids), \
                updated_at = excluded.updated_at, change_seq = excluded.change_seq \
                RETURNING share_weekly_score, private_mode, shared_category_ids, updated_at
                """)
            guard let row else { return SharingSettings.defaults }
            return try Self.sharingSettings(row)
        }
    }

    /// A `sharing_settings` row read as `share_weekly_score, private_mode, shared_category_ids, updated_at`.
    static func sharingSettings(_ row: PostgresRow) throws -> SharingSettings {
        SharingSettings(
            shareWeeklyScore: try row.decode(0), privateMode: try row.decode(1),
            sharedCategoryIDs: try row.decode(2), updatedAt: try row.decode(3, as: Date?.self))
    }
}
