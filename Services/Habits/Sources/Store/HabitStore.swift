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

    /// The user's habits of `ids` (deleted ones included), in the order of `ids`; `nil` in place of an id the user has
    /// no habit with.
    public func habits(user userID: UUID, ids: [UUID]) async throws -> [HabitRecord?] {
        guard !ids.isEmpty else { return [] }
        var found: [UUID: HabitRecord] = [:]
        for row in try await pool.query("SELECT * FROM habit_details WHERE user_id = \(userID) AND id = ANY(\(ids))") {
            let habit = try HabitRecord(row: row)
            found[habit.id] = habit
        }
        return ids.map { found[$0] }
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

    /// The newest change-sequence value among the user's habits, deleted ones included (0 before their first habit);
    /// `nil` for a user the service does not know (a new or a deleted account). Every write to a habit or its weekly
    /// targets sets the habit's `change_seq` to the user's next value, and a user's writes take their values one
    /// after another under the user's lock, so this moves with every change to the user's habit list and only then:
    /// a check-in leaves it. One backward step on the `habits_changes` index.
    public func habitListVersion(_ userID: UUID) async throws -> Int64? {
        try await pool.queryRow(
            """
            SELECT coalesce((SELECT max(change_seq) FROM habits WHERE user_id = u.user_id), 0) FROM users u \
            WHERE u.user_id = \(userID)
            """
        )?.decode(0, as: Int64.self)
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
            // Under the user's lock, as SetUnitHolds takes it: no hold can be added between this check and the update.
            if unit != current.unit, try await isUnitHeld(transaction, user: userID, habit: id) {
                throw HabitsError.habitUnitInUse(id)
            }
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

    /// Moves the `live_from` of each habit in `firstDays` back to its day there when that day is earlier, and the
    /// habit's first target period back to that day's week (with the target it had), so week views, scores and goal
    /// totals count the habit in the weeks of its earliest entries. A moved habit is stamped with `sequence`, so the
    /// change feed carries it. What ImportEntries and MarkHabitDone do with entries dated before a habit's first week.
    func moveFirstWeekBack(
        _ transaction: PostgresTransaction, user userID: UUID, to firstDays: [UUID: LocalDate], sequence: Int64,
        now: Date
    ) async throws {
        guard !firstDays.isEmpty else { return }
        let habitIDs = Array(firstDays.keys)
        let days = habitIDs.map { Int32(firstDays[$0]?.daysSinceEpoch ?? 0) }
        try await transaction.execute(
            """
            WITH earliest AS (SELECT e.habit_id, DATE '1970-01-01' + e.day AS first_day \
            FROM unnest(\(habitIDs)::uuid[], \(days)::integer[]) AS e(habit_id, day)), \
            moved AS (UPDATE habits h SET live_from = e.first_day, updated_at = \(now), change_seq = \(sequence) \
            FROM earliest e WHERE h.user_id = \(userID) AND h.id = e.habit_id AND e.first_day < h.live_from \
            RETURNING h.id, h.live_from - (extract(isodow FROM h.live_from)::integer - 1) AS monday) \
            UPDATE habit_targets t SET week_start = m.monday FROM moved m \
            WHERE t.user_id = \(userID) AND t.habit_id = m.id AND m.monday < t.week_start \
            AND t.week_start = (SELECT min(f.week_start) FROM habit_targets f \
            WHERE f.user_id = \(userID) AND f.habit_id = m.id)
            """)
    }

    private func requireLiveCategory(_ transaction: PostgresTransaction, user userID: UUID, id: UUID) async throws {
        guard
            try await transaction.queryRow(
                "SELECT 1 FROM categories WHERE user_id = \(userID) AND id = \(id) AND deleted_at IS NULL") != nil
        else { throw HabitsError.categoryNotFound(id) }
    }
}
