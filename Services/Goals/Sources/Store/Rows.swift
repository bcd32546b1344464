internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowPostgres

// Decoding the rows of `SELECT *` from goal_details, goal_links and assessments, by column name.

extension GoalRecord {
    /// A row of the `goal_details` view.
    init(row: PostgresRow) throws {
        let weeks = try row.decode("target_weeks", as: [Int32]?.self) ?? []
        let values = try row.decode("target_values", as: [String]?.self) ?? []
        guard let type = GoalType(rawValue: try row.decode("type")),
            let horizon = Horizon(rawValue: try row.decode("horizon")),
            let state = GoalState(rawValue: try row.decode("state"))
        else { throw PostgresError(kind: .decodingFailed, message: "a goal row with an unknown type, horizon or state") }
        self.init(
            id: try row.decode("id"), ownerID: try row.decode("user_id"), title: try row.decode("title"),
            description: try row.decode("description"), icon: try row.decode("icon"),
            categoryID: try row.decode("category_id"), type: type, horizon: horizon, unit: try row.decode("unit"),
            levels: try row.decode("levels"), ratingScale: try row.decode("rating_scale", as: Int16?.self).map(Int.init),
            parentGoalID: try row.decode("parent_goal_id"), startDate: try row.decode("start_date"),
            endDate: try row.decode("end_date"), targetDate: try row.decode("target_date"),
            conversationID: try row.decode("conversation_id"), shared: try row.decode("shared"), state: state,
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"),
            deletedAt: try row.decode("deleted_at"), changeSequence: try row.decode("change_seq"),
            createdSequence: try row.decode("created_seq"),
            targets: zip(weeks, values).map {
                TargetPeriod(weekStart: LocalDate(daysSinceEpoch: Int($0)), value: Double($1) ?? 0)
            }, partnerID: try row.decode("partner_id"))
    }
}

extension GoalLinkRecord {
    init(row: PostgresRow) throws {
        self.init(
            goalID: try row.decode("goal_id"), habitID: try row.decode("habit_id"),
            habitUserID: try row.decode("habit_user_id"), linkedFrom: try row.decode("linked_from"),
            linkedUntil: try row.decode("linked_until"), habitDeleted: try row.decode("habit_deleted"))
    }
}

extension AssessmentRecord {
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("id"), goalID: try row.decode("goal_id"), date: try row.decode("local_date"),
            value: Int(try row.decode("value", as: Int16.self)), note: try row.decode("note"),
            createdAt: try row.decode("created_at"), deletedAt: try row.decode("deleted_at"),
            changeSequence: try row.decode("change_seq"))
    }
}

extension Decimal {
    /// The decimal a person reads in `value` (0.1 stays 0.1, not the binary double's long expansion).
    static func exact(_ value: Double) -> Decimal {
        Decimal(string: String(value), locale: Locale(identifier: "en_US_POSIX")) ?? Decimal(value)
    }
}
