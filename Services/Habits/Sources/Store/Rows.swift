internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowPostgres

// Decoding the rows of `SELECT *` from categories, habit_details and entries, by column name.

extension CategoryRecord {
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("id"), name: try row.decode("name"), position: Int(try row.decode("position", as: Int32.self)),
            isDefault: try row.decode("is_default"), createdAt: try row.decode("created_at"),
            updatedAt: try row.decode("updated_at"), deletedAt: try row.decode("deleted_at"),
            changeSequence: try row.decode("change_seq"))
    }
}

extension HabitRecord {
    /// A row of the `habit_details` view.
    init(row: PostgresRow) throws {
        let weeks = try row.decode("target_weeks", as: [Int32]?.self) ?? []
        let targets = try row.decode("weekly_targets", as: [Int32]?.self) ?? []
        self.init(
            id: try row.decode("id"), name: try row.decode("name"), categoryID: try row.decode("category_id"),
            unit: try row.decode("unit"), liveFrom: try row.decode("live_from"), deletedOn: try row.decode("deleted_on"),
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"),
            deletedAt: try row.decode("deleted_at"), changeSequence: try row.decode("change_seq"),
            createdSequence: try row.decode("created_seq"),
            targets: zip(weeks, targets).map {
                TargetPeriod(weekStart: LocalDate(daysSinceEpoch: Int($0)), target: Int($1))
            })
    }
}

extension EntryRecord {
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("id"), habitID: try row.decode("habit_id"), date: try row.decode("local_date"),
            value: try row.decode("value"), createdAt: try row.decode("created_at"),
            deletedAt: try row.decode("deleted_at"), changeSequence: try row.decode("change_seq"))
    }
}
