internal import Foundation
internal import HabitFlowPostgres

/// What other services' events change, each in the transaction that records the event as applied.
extension SocialStore {
    /// Removes everything of a user (UserDeleted, PurgeUser) and remembers the account as deleted. Their partnership
    /// ends first, publishing `PartnershipEnded` (goals turns their shared goals into personal ones); then every row
    /// naming them goes by cascade, on both sides: friendships, requests, blocks, the partnership's rows. No
    /// tombstone survives for them, so their friends' clients see them disappear from ListFriends on a full
    /// refresh; each former friend (and each user a request linked them to) takes a change-sequence value, so their
    /// cached data is no longer current. Returns whether the service held anything of the user.
    @discardableResult
    func purgeUser(_ transaction: PostgresTransaction, _ userID: UUID, now: Date) async throws -> Bool {
        let related = try await transaction.query(
            """
            SELECT friend_id FROM friendships WHERE user_id = \(userID) \
            UNION SELECT partner_id FROM partners WHERE user_id = \(userID) \
            UNION SELECT recipient_id FROM requests WHERE sender_id = \(userID) AND recipient_id IS NOT NULL \
            UNION SELECT sender_id FROM requests WHERE recipient_id = \(userID)
            """
        ).map { try $0.decode(0, as: UUID.self) }
        var sequences: [UUID: Int64] = [:]
        for id in Set(related + [userID]).sorted(by: { $0.uuidString < $1.uuidString }) {
            sequences[id] = try await users.nextChangeSequence(transaction, user: id)
        }
        if let partnership = try await currentPartnership(transaction, of: userID) {
            try await endPartnership(
                transaction, partnership, userSequence: sequences[userID] ?? 0,
                partnerSequence: sequences[partnership.partner.id] ?? 0, now: now)
        }
        return try await users.purge(transaction, user: userID)
    }

    /// PurgeUser: ``purgeUser(_:_:now:)`` in a transaction of its own.
    func purgeUser(_ userID: UUID, now: Date) async throws -> Bool {
        try await pool.transaction { try await purgeUser($0, userID, now: now) }
    }

    /// Habits deleted a category: it is remembered (a settings update naming it later drops it too) and leaves the
    /// user's shared categories.
    func categoryDeleted(_ transaction: PostgresTransaction, user userID: UUID, category categoryID: UUID, now: Date)
        async throws
    {
        // The user's row lock first: a settings update naming the category either committed before (and is
        // cleaned here) or waits and then finds it in deleted_categories.
        guard try await users.createIfMissing(transaction, user: userID, zone: nil, zoneChangedAt: nil, now: now) != nil,
            let sequence = try await users.nextChangeSequence(transaction, user: userID)
        else { return }
        try await transaction.execute(
            """
            INSERT INTO deleted_categories (user_id, category_id) VALUES (\(userID), \(categoryID)) \
            ON CONFLICT DO NOTHING
            """)
        try await transaction.execute(
            """
            UPDATE sharing_settings SET shared_category_ids = array_remove(shared_category_ids, \(categoryID)), \
            updated_at = \(now), change_seq = \(sequence) \
            WHERE user_id = \(userID) AND \(categoryID) = ANY(shared_category_ids)
            """)
    }
}
