public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres

extension GoalsStore {
    /// Adds an assessment to a live level or rating goal. With an id the user has already, returns that assessment
    /// (a retry) before any rule is checked.
    public func addAssessment(
        user userID: UUID, id: UUID, goal goalID: UUID, date: LocalDate, value: Int, note: String, now: Date
    ) async throws -> AssessmentRecord {
        try await write(user: userID) { transaction, sequence in
            if let existing = try await assessment(transaction, user: userID, id: id) { return existing }
            let goal = try await liveGoal(transaction, user: userID, id: goalID)
            guard goal.type.isAssessed else { throw GoalsError.notAssessable(goal.type) }
            try await transaction.execute(
                """
                INSERT INTO assessments (user_id, id, goal_id, local_date, value, note, created_at, change_seq) \
                VALUES (\(userID), \(id), \(goalID), \(date), \(Int16(value)), \(note), \(now), \(sequence))
                """)
            try await touch(transaction, user: userID, goal: goalID, sequence: sequence, now: now)
            guard let added = try await assessment(transaction, user: userID, id: id) else {
                throw GoalsError.assessmentNotFound(id)
            }
            return added
        }
    }

    func assessment(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws
        -> AssessmentRecord?
    {
        try await database.queryRow("SELECT * FROM assessments WHERE user_id = \(userID) AND id = \(id)")
            .map(AssessmentRecord.init(row:))
    }

    /// A live goal's live assessments, newest first (by date, then creation: a live assessment's change value is
    /// the one it was added with), after the one at `after`.
    public func assessments(
        user userID: UUID, goal goalID: UUID, after: (date: LocalDate, sequence: Int64)?, limit: Int
    ) async throws -> [AssessmentRecord] {
        _ = try await liveGoal(pool, user: userID, id: goalID)
        let date = after?.date ?? LocalDate(year: 9999, month: 12, day: 31)!
        let sequence = after?.sequence ?? Int64.max
        return try await pool.query(
            """
            SELECT * FROM assessments WHERE user_id = \(userID) AND goal_id = \(goalID) AND deleted_at IS NULL \
            AND (local_date, change_seq) < (\(date), \(sequence)) \
            ORDER BY local_date DESC, change_seq DESC LIMIT \(limit)
            """
        ).map(AssessmentRecord.init(row:))
    }

    /// Removes (tombstones) an assessment of a live goal; removing it again succeeds.
    public func deleteAssessment(user userID: UUID, goal goalID: UUID, id: UUID, now: Date) async throws {
        try await write(user: userID) { transaction, sequence in
            _ = try await liveGoal(transaction, user: userID, id: goalID)
            guard let current = try await assessment(transaction, user: userID, id: id), current.goalID == goalID else {
                throw GoalsError.assessmentNotFound(id)
            }
            if current.deletedAt != nil { return }
            try await transaction.execute(
                """
                UPDATE assessments SET deleted_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
            try await touch(transaction, user: userID, goal: goalID, sequence: sequence, now: now)
        }
    }
}
