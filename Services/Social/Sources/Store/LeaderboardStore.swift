internal import Foundation
internal import HabitFlowCalendar

/// Who may be on a user's leaderboard: the user and their live friends (`friendships`), each with their sharing
/// settings (`sharing_settings`; the defaults without a row). ``Leaderboard/members(caller:friends:)`` decides who
/// is on it.
extension SocialStore {
    /// The user's own settings and their live friends' (at most 100), in one statement that reads one user's rows of
    /// `friendships` by its primary key and the friends' settings by theirs.
    ///
    /// Read with the user's own row, whose zone picks the board's week: `nil` when the service does not know the user
    /// (a new one is then created, a deleted account refused, by ``userVersion(_:now:)``). `names` holds the names
    /// auth's account events gave the members (what their friends lists show), for those it named.
    func leaderboardCandidatesOfKnownUser(
        _ userID: UUID
    ) async throws -> (zone: UserTimeZone, caller: BoardMember, friends: [BoardMember], names: [UUID: PersonRecord])? {
        let rows = try await pool.query(
            """
            SELECT m.user_id, coalesce(s.share_weekly_score, true), coalesce(s.private_mode, false), \
            coalesce(s.shared_category_ids, '{}'::uuid[]), s.updated_at, m.user_id = \(userID), u.time_zone, \
            coalesce(p.username, ''), coalesce(p.display_name, '') \
            FROM users u CROSS JOIN LATERAL (SELECT \(userID)::uuid AS user_id \
                  UNION ALL SELECT friend_id FROM friendships WHERE user_id = \(userID) AND deleted_at IS NULL) AS m \
            LEFT JOIN sharing_settings AS s ON s.user_id = m.user_id \
            LEFT JOIN users AS p ON p.user_id = m.user_id \
            WHERE u.user_id = \(userID)
            """)
        guard let first = rows.first else { return nil }
        var caller = BoardMember(userID: userID, settings: .defaults)
        var friends: [BoardMember] = []
        var names: [UUID: PersonRecord] = [:]
        for row in rows {
            let member = BoardMember(
                userID: try row.decode(0),
                settings: SharingSettings(
                    shareWeeklyScore: try row.decode(1), privateMode: try row.decode(2),
                    sharedCategoryIDs: try row.decode(3), updatedAt: try row.decode(4, as: Date?.self)))
            if try row.decode(5, as: Bool.self) { caller = member } else { friends.append(member) }
            let (username, displayName) = (try row.decode(7, as: String.self), try row.decode(8, as: String.self))
            if !username.isEmpty {
                names[member.userID] = PersonRecord(
                    id: member.userID, username: username, displayName: displayName.isEmpty ? username : displayName)
            }
        }
        return (UserTimeZone.stored(try first.decode(6, as: String.self)), caller, friends, names)
    }
}
