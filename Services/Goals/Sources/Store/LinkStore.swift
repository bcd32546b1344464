public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres

extension GoalsStore {
    /// Links one of `habitUserID`'s habits from `today`'s week on. A habit linked already leaves the goal as it is;
    /// one unlinked in this week or the last is linked again without a gap (its link row reopens).
    public func linkHabit(
        user userID: UUID, goal goalID: UUID, habit habitID: UUID, habitUser habitUserID: UUID, today: LocalDate,
        now: Date
    ) async throws -> GoalRecord {
        try await write(user: userID) { transaction, sequence in
            let goal = try await liveGoal(transaction, user: userID, id: goalID)
            guard goal.state != .archived else {
                throw GoalsError.invalidTransition(goal: goalID, from: goal.state.rawValue, action: "link")
            }
            let week = IsoWeek(containing: max(today, goal.startDate))
            let links = try await transaction.query(
                "SELECT * FROM goal_links WHERE user_id = \(userID) AND goal_id = \(goalID)"
            ).map(GoalLinkRecord.init(row:))
            if links.contains(where: { $0.habitID == habitID && $0.isOpen }) { return goal }
            guard links.count(where: \.isOpen) < GoalRules.maximumOpenLinks else { throw GoalsError.tooManyLinks }
            // A link that ended in this week or the one before continues: no week is left out, none counted twice.
            let reopened = try await transaction.execute(
                """
                UPDATE goal_links SET linked_until = NULL WHERE user_id = \(userID) AND goal_id = \(goalID) \
                AND habit_id = \(habitID) AND linked_until >= \(week.monday.adding(days: -1))
                """)
            if reopened == 0 {
                try await transaction.execute(
                    """
                    INSERT INTO goal_links (user_id, goal_id, habit_id, habit_user_id, linked_from) \
                    VALUES (\(userID), \(goalID), \(habitID), \(habitUserID), \(week.monday))
                    """)
            }
            try await touch(transaction, user: userID, goal: goalID, sequence: sequence, now: now)
            return try await liveGoal(transaction, user: userID, id: goalID)
        }
    }

    /// Ends the habit's link with `today`'s week: what it gave stays. An unlinked habit leaves the goal as it is.
    /// On a shared goal each partner unlinks only habits of their own (`habitUser`).
    public func unlinkHabit(
        user userID: UUID, goal goalID: UUID, habit habitID: UUID, habitUser habitUserID: UUID? = nil,
        today: LocalDate, now: Date
    ) async throws -> GoalRecord {
        try await write(user: userID) { transaction, sequence in
            let goal = try await liveGoal(transaction, user: userID, id: goalID)
            let ended = try await endOpenLinks(
                transaction, user: userID, goal: goalID, habit: habitID, habitUser: habitUserID,
                today: max(today, goal.startDate))
            if ended > 0 { try await touch(transaction, user: userID, goal: goalID, sequence: sequence, now: now) }
            return try await liveGoal(transaction, user: userID, id: goalID)
        }
    }

    /// The habits a goal links now (open links).
    public func openLinks(user userID: UUID, goal goalID: UUID) async throws -> [GoalLinkRecord] {
        try await links(user: userID, goal: goalID).filter(\.isOpen)
    }

    /// Ends the goal's open links (one habit's, or all) with `today`'s week. A link that started this week ends
    /// with it, so it still counts this week's entries.
    @discardableResult
    func endOpenLinks(
        _ transaction: PostgresTransaction, user userID: UUID, goal goalID: UUID, habit habitID: UUID? = nil,
        habitUser habitUserID: UUID? = nil, today: LocalDate
    ) async throws -> Int {
        try await transaction.execute(
            """
            UPDATE goal_links SET linked_until = \(IsoWeek(containing: today).sunday) \
            WHERE user_id = \(userID) AND goal_id = \(goalID) AND linked_until IS NULL \
            AND (\(habitID as UUID?)::uuid IS NULL OR habit_id = \(habitID as UUID?)) \
            AND (\(habitUserID as UUID?)::uuid IS NULL OR habit_user_id = \(habitUserID as UUID?))
            """)
    }

    /// Stamps a goal as changed (its links are part of it in the change feed and in cached progress).
    func touch(_ transaction: PostgresTransaction, user userID: UUID, goal goalID: UUID, sequence: Int64, now: Date)
        async throws
    {
        try await transaction.execute(
            "UPDATE goals SET updated_at = \(now), change_seq = \(sequence) WHERE user_id = \(userID) AND id = \(goalID)")
    }
}
