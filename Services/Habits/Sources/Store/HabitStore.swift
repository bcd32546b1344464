public import HabitFlowCalendar
public import Foundation
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// The fields an update sets; `nil` leaves a field as it is.
public struct HabitChanges: Sendable, Hashable {
    public var name: String?
    /// `.some(nil)` moves the habit to Uncategorized.
    public var categoryID: UUID??
    public var weeklyTarget: Int?
    /// `.some(nil)` removes the unit.
    public var unit: String??

    public init(name: String? = nil, categoryID: UUID?? = nil, weeklyTarget: Int? = nil, unit: String?? = nil) {
        self.name = name
        self.categoryID = categoryID
        self.weeklyTarget = weeklyTarget
        self.unit = unit
    }
}

extension HabitsStore {
    /// A habit of the user's, deleted ones included; `nil` when the user has none with that id.
    public func habit(user userID: UUID, id: UUID) async throws -> HabitRecord? {
        try await habit(pool, user: userID, id: id)
    }

    func habit(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> HabitRecord? {
        try await database.queryRow("SELECT * FROM habit_details WHERE user_id = \(userID) AND id = \(id)")
            .map(HabitRecord.init(row:))
    }

    /// Habits in creation order, after the one created with sequence value `createdAfter`.
    public func habits(
        user userID: UUID, includeDeleted: Bool, createdAfter: Int64, limit: Int
    ) async throws -> [HabitRecord] {
        try await pool.query(
            """
            SELECT * FROM habit_details WHERE user_id = \(userID) AND (\(includeDeleted) OR deleted_at IS NULL) \
            AND created_seq > \(createdAfter) ORDER BY created_seq LIMIT \(limit)
            """
        ).map(HabitRecord.init(row:))
    }

    /// Creates a habit counting from `today`'s week with `weeklyTarget`. With a client id that exists already,
    /// returns that habit (a retry) before any rule is checked.
    public func createHabit(
        user userID: UUID, id: UUID?, name: String, categoryID: UUID?, weeklyTarget: Int, unit: String?,
        today: LocalDate, now: Date
    ) async throws -> HabitRecord {
        try await write(user: userID) { transaction, sequence in
            if let id, let existing = try await habit(transaction, user: userID, id: id) { return existing }
            if let categoryID { try await requireLiveCategory(transaction, user: userID, id: categoryID) }
            let liveCount = try await transaction.queryRow(
                "SELECT count(*) FROM habits WHERE user_id = \(userID) AND deleted_at IS NULL")?.decode(0, as: Int64.self)
            guard (liveCount ?? 0) < HabitRules.maximumLiveHabits else { throw HabitsError.habitLimit }
            let habitID = id ?? UUID.random()
            do {
                try await transaction.execute(
                    """
                    WITH habit AS ( \
                    INSERT INTO habits (user_id, id, category_id, name, unit, live_from, created_at, updated_at, change_seq, \
                    created_seq) VALUES (\(userID), \(habitID), \(categoryID as UUID?), \(name), \(unit as String?), \
                    \(today), \(now), \(now), \(sequence), \(sequence)) \
                    RETURNING user_id, id) \
                    INSERT INTO habit_targets (user_id, habit_id, week_start, weekly_target) \
                    SELECT user_id, id, \(IsoWeek(containing: today).monday), \(Int16(weeklyTarget)) FROM habit
                    """)
            } catch let error as PostgresError where error.violates("habits_live_name") {
                throw HabitsError.habitNameTaken(name)
            }
            return try required(try await habit(transaction, user: userID, id: habitID))
        }
    }

    /// Sets the given fields (last write wins). A new target applies from `today`'s week on: that week's period is
    /// added or replaced, earlier periods stay.
    public func updateHabit(
        user userID: UUID, id: UUID, changes: HabitChanges, today: LocalDate, now: Date
    ) async throws -> HabitRecord {
        try await write(user: userID) { transaction, sequence in
            guard let current = try await habit(transaction, user: userID, id: id) else {
                throw HabitsError.habitNotFound(id)
            }
            guard !current.isDeleted else { throw HabitsError.habitDeleted(id) }
            if case .some(.some(let categoryID)) = changes.categoryID {
                try await requireLiveCategory(transaction, user: userID, id: categoryID)
            }
            let name = changes.name ?? current.name
            let categoryID = changes.categoryID ?? current.categoryID
            let unit = changes.unit ?? current.unit
            do {
                try await transaction.execute(
                    """
                    UPDATE habits SET name = \(name), category_id = \(categoryID as UUID?), unit = \(unit as String?), \
                    updated_at = \(now), change_seq = \(sequence) WHERE user_id = \(userID) AND id = \(id)
                    """)
            } catch let error as PostgresError where error.violates("habits_live_name") {
                throw HabitsError.habitNameTaken(name)
            }
            let week = IsoWeek(containing: today)
            if let target = changes.weeklyTarget, target != current.target(in: week) {
                try await transaction.execute(
                    """
                    INSERT INTO habit_targets (user_id, habit_id, week_start, weekly_target) \
                    VALUES (\(userID), \(id), \(week.monday), \(Int16(target))) \
                    ON CONFLICT (user_id, habit_id, week_start) DO UPDATE SET weekly_target = EXCLUDED.weekly_target
                    """)
            }
            return try required(try await habit(transaction, user: userID, id: id))
        }
    }

    /// Archives the habit from `today`'s week on (earlier weeks keep it; its entries stay) and publishes
    /// HabitDeleted. A habit deleted before is returned as it is.
    public func deleteHabit(user userID: UUID, id: UUID, today: LocalDate, now: Date) async throws -> HabitRecord {
        try await write(user: userID) { transaction, sequence in
            guard let current = try await habit(transaction, user: userID, id: id) else {
                throw HabitsError.habitNotFound(id)
            }
            if current.isDeleted { return current }
            try await transaction.execute(
                """
                UPDATE habits SET deleted_at = \(now), deleted_on = greatest(\(today), live_from), updated_at = \(now), \
                change_seq = \(sequence) WHERE user_id = \(userID) AND id = \(id)
                """)
            var event = Habitflow_Events_V1_HabitDeleted()
            event.userID = userID.lowercasedString
            event.habitID = id.lowercasedString
            try await transaction.appendToOutbox(
                OutboxEvent(aggregateType: "habit", aggregateID: event.habitID, message: event))
            return try required(try await habit(transaction, user: userID, id: id))
        }
    }

    private func requireLiveCategory(_ transaction: PostgresTransaction, user userID: UUID, id: UUID) async throws {
        guard
            try await transaction.queryRow(
                "SELECT 1 FROM categories WHERE user_id = \(userID) AND id = \(id) AND deleted_at IS NULL") != nil
        else { throw HabitsError.categoryNotFound(id) }
    }
}
