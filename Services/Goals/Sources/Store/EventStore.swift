public import HabitFlowCalendar
public import Foundation
public import HabitFlowPostgres

// What the events of other services change here (applied by `GoalsEvents`, each exactly once, inside the
// transaction that records the event as processed).
extension GoalsStore {
    /// A deleted category: the user's goals in it become Uncategorized, and a goal created with it later (the event
    /// was on its way) is refused it.
    public func categoryDeleted(_ transaction: PostgresTransaction, user userID: UUID, category categoryID: UUID, now: Date)
        async throws
    {
        guard try await users.createIfMissing(transaction, user: userID, zone: nil, zoneChangedAt: nil, now: now) != nil
        else { return }
        try await transaction.execute(
            """
            INSERT INTO deleted_categories (user_id, category_id) VALUES (\(userID), \(categoryID)) \
            ON CONFLICT DO NOTHING
            """)
        try await stampChanged(
            transaction, user: userID, now: now,
            """
            UPDATE goals SET category_id = NULL WHERE user_id = \(userID) AND category_id = \(categoryID) \
            RETURNING id
            """)
    }

    /// A deleted habit: its links are marked and end with the current week (in the goal owner's zone). Its entries
    /// stay in habits, so what it gave stays in every week.
    public func habitDeleted(
        _ transaction: PostgresTransaction, habitUser habitUserID: UUID, habit habitID: UUID, clock: UserClock
    ) async throws {
        let owners = try await transaction.query(
            """
            SELECT DISTINCT l.user_id, u.time_zone FROM goal_links l JOIN users u ON u.user_id = l.user_id \
            WHERE l.habit_user_id = \(habitUserID) AND l.habit_id = \(habitID)
            """
        ).map { (try $0.decode(0, as: UUID.self), UserTimeZone.stored(try $0.decode(1))) }
        for (owner, zone) in owners {
            let sunday = IsoWeek(containing: clock.today(in: zone)).sunday
            try await stampChanged(
                transaction, user: owner, now: clock.now,
                """
                UPDATE goal_links SET habit_deleted = true, \
                linked_until = CASE WHEN linked_until IS NULL THEN greatest(\(sunday), linked_from + 6) ELSE linked_until END \
                WHERE user_id = \(owner) AND habit_user_id = \(habitUserID) AND habit_id = \(habitID) \
                AND NOT habit_deleted RETURNING goal_id
                """)
        }
    }

    /// Runs an update of the user's goals or links that returns the ids of the goals it touched, then stamps them
    /// with the user's next change value (links are part of their goal in the change feed and in cached progress).
    private func stampChanged(
        _ transaction: PostgresTransaction, user userID: UUID, now: Date, _ update: PostgresQuery
    ) async throws {
        let goalIDs = try await transaction.query(update).map { try $0.decode(0, as: UUID.self) }
        guard !goalIDs.isEmpty, let sequence = try await users.nextChangeSequence(transaction, user: userID) else {
            return
        }
        try await transaction.execute(
            """
            UPDATE goals SET change_seq = \(sequence), updated_at = \(now) \
            WHERE user_id = \(userID) AND id = ANY(\(goalIDs)::uuid[])
            """)
    }
}
