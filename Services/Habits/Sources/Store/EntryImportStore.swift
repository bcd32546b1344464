public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres

/// One entry of an import (`HabitsInternal/ImportEntries`), validated: a caller-chosen id, a past or current date.
public struct EntryToImport: Sendable, Hashable {
    public var id: UUID
    public var habitID: UUID
    public var date: LocalDate
    public var value: Decimal

    public init(id: UUID, habitID: UUID, date: LocalDate, value: Decimal) {
        self.id = id
        self.habitID = habitID
        self.date = date
        self.value = value
    }
}

/// What an import did: entries it added, and entries whose id the user had already (left as they were).
public struct EntryImportResult: Sendable, Hashable {
    public var imported: Int
    public var existing: Int
}

extension HabitsStore {
    /// Adds `entries` (distinct ids) to live habits of the user in one transaction: all of them, or nothing when a
    /// habit is not the user's (NOT_FOUND) or deleted (FAILED_PRECONDITION). Ids the user has already are skipped,
    /// so a retried batch adds nothing twice. A habit whose `live_from` is after its earliest new entry is moved
    /// back to that entry's day (its first target period to that week), so the imported weeks count it.
    ///
    /// Takes one change-sequence value for the whole batch, like any write (caches and the change feed see it).
    public func importEntries(
        user userID: UUID, entries: [EntryToImport], now: Date
    ) async throws -> EntryImportResult {
        var habitIDs: [UUID] = []
        var seenHabits: Set<UUID> = []
        for entry in entries where seenHabits.insert(entry.habitID).inserted { habitIDs.append(entry.habitID) }
        return try await write(user: userID) { transaction, sequence in
            // Under the user's lock, so a concurrent DeleteHabit cannot slip between this check and the insert.
            var deleted: [UUID: Bool] = [:]
            for row in try await transaction.query(
                "SELECT id, deleted_at IS NOT NULL FROM habits WHERE user_id = \(userID) AND id = ANY(\(habitIDs))")
            {
                deleted[try row.decode(0, as: UUID.self)] = try row.decode(1, as: Bool.self)
            }
            for habitID in habitIDs {
                guard let isDeleted = deleted[habitID] else { throw HabitsError.habitNotFound(habitID) }
                if isDeleted { throw HabitsError.habitDeleted(habitID) }
            }
            // One statement for the batch: the arrays are bound parameters, unnested into rows. It answers the
            // earliest new day per habit, and how many entries it added.
            var imported = 0
            var firstDays: [UUID: LocalDate] = [:]
            for row in try await transaction.query(
                """
                WITH batch AS (SELECT * FROM unnest(\(entries.map(\.id))::uuid[], \(entries.map(\.habitID))::uuid[], \
                \(entries.map { Int32($0.date.daysSinceEpoch) })::integer[], \
                \(entries.map { $0.value.description })::text[]::numeric[]) AS b(id, habit_id, day, value)), \
                inserted AS (INSERT INTO entries (user_id, id, habit_id, local_date, value, created_at, change_seq) \
                SELECT \(userID), b.id, b.habit_id, DATE '1970-01-01' + b.day, b.value, \(now), \(sequence) \
                FROM batch b ON CONFLICT (user_id, id) DO NOTHING RETURNING habit_id, local_date) \
                SELECT habit_id, min(local_date), count(*) FROM inserted GROUP BY habit_id
                """)
            {
                firstDays[try row.decode(0, as: UUID.self)] = try row.decode(1, as: LocalDate.self)
                imported += Int(try row.decode(2, as: Int64.self))
            }
            try await moveFirstWeekBack(transaction, user: userID, to: firstDays, sequence: sequence, now: now)
            return EntryImportResult(imported: imported, existing: entries.count - imported)
        }
    }
}
