internal import Foundation
internal import HabitFlowPostgres

/// Friendships: one row per side, `(user, friend)` and `(friend, user)`, each stamped with its own user's change
/// sequence; removing a friend tombstones both rows.
extension SocialStore {
    /// Whether `friendID` is `userID`'s friend now.
    func isFriend(_ db: some PostgresQueryable, _ userID: UUID, _ friendID: UUID) async throws -> Bool {
        try await db.queryRow(
            """
            SELECT 1 FROM friendships WHERE user_id = \(userID) AND friend_id = \(friendID) AND deleted_at IS NULL
            """) != nil
    }

    /// The user's friends now.
    func friendCount(_ db: some PostgresQueryable, _ userID: UUID) async throws -> Int {
        Int(
            try await db.queryRow(
                "SELECT count(*) FROM friendships WHERE user_id = \(userID) AND deleted_at IS NULL"
            )?.decode(0, as: Int64.self) ?? 0)
    }

    /// Refuses a new friendship that would take either side past ``SocialRules/maximumFriends`` (run under both
    /// users' locks, so it holds under concurrency).
    func checkRoomForFriend(_ transaction: PostgresTransaction, _ userID: UUID, _ otherID: UUID) async throws {
        if try await friendCount(transaction, userID) >= SocialRules.maximumFriends {
            throw SocialError.friendLimit(caller: true)
        }
        if try await friendCount(transaction, otherID) >= SocialRules.maximumFriends {
            throw SocialError.friendLimit(caller: false)
        }
    }

    /// Makes the two friends (both rows, reviving tombstones).
    func befriend(
        _ transaction: PostgresTransaction, _ userID: UUID, _ otherID: UUID, userSequence: Int64,
        otherSequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO friendships (user_id, friend_id, since, change_seq) \
            VALUES (\(userID), \(otherID), \(now), \(userSequence)), (\(otherID), \(userID), \(now), \(otherSequence)) \
            ON CONFLICT (user_id, friend_id) DO UPDATE SET since = EXCLUDED.since, deleted_at = NULL, \
            change_seq = EXCLUDED.change_seq
            """)
    }

    /// Ends the friendship between the two, if any (both rows tombstoned), and their partnership with it.
    func unfriend(
        _ transaction: PostgresTransaction, _ userID: UUID, _ otherID: UUID, userSequence: Int64,
        otherSequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE friendships SET deleted_at = \(now), \
            change_seq = CASE WHEN user_id = \(userID) THEN \(userSequence) ELSE \(otherSequence) END \
            WHERE deleted_at IS NULL AND ((user_id = \(userID) AND friend_id = \(otherID)) \
            OR (user_id = \(otherID) AND friend_id = \(userID)))
            """)
        if let partnership = try await currentPartnership(transaction, of: userID), partnership.partner.id == otherID {
            try await endPartnership(
                transaction, partnership, userSequence: userSequence, partnerSequence: otherSequence, now: now)
        }
    }

    /// RemoveFriend: ends the friendship (and the partnership); nothing to do when they are not friends.
    func removeFriend(_ userID: UUID, friend friendID: UUID, now: Date) async throws {
        // Checked first so that removing a stranger (or a deleted account) neither creates nor refuses anything.
        guard try await isFriend(pool, userID, friendID) else { return }
        try await write(users: userID, friendID, now: now) { transaction, userSequence, friendSequence in
            try await unfriend(
                transaction, userID, friendID, userSequence: userSequence, otherSequence: friendSequence, now: now)
        }
    }

    /// A page of the user's friends by display name (ignoring case), then id; and how many they have.
    func friends(of userID: UUID, offset: Int, limit: Int) async throws -> (friends: [FriendRecord], total: Int) {
        let friends = try await pool.query(
            """
            SELECT * FROM friend_details WHERE user_id = \(userID) AND deleted_at IS NULL \
            ORDER BY lower(display_name), friend_id OFFSET \(Int64(offset)) LIMIT \(Int64(limit))
            """
        ).map(FriendRecord.init(row:))
        return (friends, try await friendCount(pool, userID))
    }
}
