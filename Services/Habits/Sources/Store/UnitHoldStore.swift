public import Foundation
internal import HabitFlowPostgres

// Unit holds (`HabitsInternal/SetUnitHolds`): habits whose unit a holder, such as a quantity goal, relies on. While a
// habit is held, UpdateHabit refuses to change its unit. Holds are no user content: not in the change feed.

extension HabitsStore {
    /// Makes `habitIDs` (distinct) exactly what `holder` holds of the user's, replacing what it held before (none:
    /// it releases them all). All or nothing: refused when a habit is not the user's (NOT_FOUND), deleted
    /// (HABIT_DELETED) or has another unit than `unit` (UNIT_MISMATCH), checked in the order of `habitIDs`.
    ///
    /// A write like any other: it takes the user's next change-sequence value, and with it the user's row lock that
    /// ``updateHabit(user:id:changes:today:now:)`` holds while it checks for holds.
    public func setUnitHolds(user userID: UUID, holder: String, habitIDs: [UUID], unit: String) async throws {
        try await write(user: userID) { transaction, _ in
            if !habitIDs.isEmpty {
                var habits: [UUID: (unit: String?, isDeleted: Bool)] = [:]
                for row in try await transaction.query(
                    """
                    SELECT id, unit, deleted_at IS NOT NULL FROM habits \
                    WHERE user_id = \(userID) AND id = ANY(\(habitIDs))
                    """)
                {
                    habits[try row.decode(0, as: UUID.self)] = (
                        unit: try row.decode(1, as: String?.self), isDeleted: try row.decode(2, as: Bool.self)
                    )
                }
                for habitID in habitIDs {
                    guard let habit = habits[habitID] else { throw HabitsError.habitNotFound(habitID) }
                    if habit.isDeleted { throw HabitsError.habitDeleted(habitID) }
                    if habit.unit != unit {
                        throw HabitsError.unitMismatch(habitID: habitID, unit: habit.unit, wanted: unit)
                    }
                }
            }
            try await transaction.execute(
                """
                DELETE FROM unit_holds WHERE user_id = \(userID) AND holder = \(holder) \
                AND habit_id <> ALL(\(habitIDs)::uuid[])
                """)
            if !habitIDs.isEmpty {
                try await transaction.execute(
                    """
                    INSERT INTO unit_holds (user_id, holder, habit_id) \
                    SELECT \(userID), \(holder), h FROM unnest(\(habitIDs)::uuid[]) AS h \
                    ON CONFLICT (user_id, holder, habit_id) DO NOTHING
                    """)
            }
        }
    }

    /// Whether any holder holds the habit's unit.
    func isUnitHeld(_ transaction: PostgresTransaction, user userID: UUID, habit habitID: UUID) async throws -> Bool {
        try await transaction.queryRow(
            "SELECT 1 FROM unit_holds WHERE user_id = \(userID) AND habit_id = \(habitID) LIMIT 1") != nil
    }
}
