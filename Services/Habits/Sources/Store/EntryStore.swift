public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres

/// Where a page of entries ends: the last entry's date and id.
public struct EntryPagePosition: Sendable, Hashable {
    public var date: LocalDate
    public var id: UUID

    public init(date: LocalDate, id: UUID) {
        self.date = date
        self.id = id
    }
}

/// Live entries per habit and ISO week over a range of weeks, as of one of the user's change-sequence values.
public struct WeekCounts: Sendable {
    public struct Count: Sendable, Hashable {
        public var habitID: UUID
        /// The week's Monday in days since 1970-01-01: 24 bytes a count, as a cache keeps thousands of users' counts.
        public var monday: Int32
        public var count: Int32
    }

    /// The user's change-sequence value the counts include every write up to.
    public var asOf: Int64
    public var counts: [Count]

    /// These counts with the weeks `changed` read whole (a week counted 0 drops out), as of `changed.asOf`.
    public func updated(with changed: WeekCounts) -> WeekCounts {
        guard !changed.counts.isEmpty else { return WeekCounts(asOf: changed.asOf, counts: counts) }
        struct HabitWeek: Hashable {
            var habitID: UUID
            var monday: Int32
        }
        let replaced = Set(changed.counts.map { HabitWeek(habitID: $0.habitID, monday: $0.monday) })
        return WeekCounts(
            asOf: changed.asOf,
            counts: counts.filter { !replaced.contains(HabitWeek(habitID: $0.habitID, monday: $0.monday)) }
                + changed.counts.filter { $0.count > 0 })
    }
}

/// What ``HabitsStore/weekCounts(user:from:through:changedSince:)`` reads in its one statement: the counts, and the
/// user's stored zone and habit-list version as of the same snapshot.
public struct ScoreHistoryCounts: Sendable {
    public var zoneName: String
    public var habitListVersion: Int64
    public var counts: WeekCounts
}

/// Entries of one habit in one ISO week.
public struct WeekTotal: Sendable, Hashable {
    public var habitID: UUID
    public var week: IsoWeek
    public var count: Int
    public var valueSum: Decimal
}

extension HabitsStore {
    /// What a write for a day of the user's (``markDone(user:habit:entry:date:value:now:zoneName:)``,
    /// ``markNotDone(user:habit:date:now:zoneName:)``) did.
    public enum DayWriteOutcome<Value: Sendable>: Sendable {
        case written(Value)
        /// Nothing was written: the user's stored zone is no longer `zoneName`, so `date` may not be what the caller
        /// meant by "today". The caller computes the day again in the zone stored now.
        case zoneChanged(storedZoneName: String)
    }

    /// Adds one entry on `date` to a live habit, provided the user's stored zone is still `zoneName` (the zone the
    /// caller took `date`, or the check that it is not in the future, from). With a client id that exists already,
    /// returns that entry (a retry).
    ///
    /// One statement (its own transaction): the user's row is locked only for the insert and the commit, which
    /// keeps a burst of check-ins from queueing behind one another for long. The zone is compared under that lock,
    /// so a zone change committed meanwhile is seen, never written past.
    ///
    /// A date before the habit's `live_from` (a day before the week it was created in, say) moves the habit's first
    /// week back as an import does (``moveFirstWeekBack(_:user:to:sequence:now:)``), in a transaction of its own:
    /// the rare case, taken when the one statement wrote nothing for that reason.
    public func markDone(
        user userID: UUID, habit habitID: UUID, entry entryID: UUID?, date: LocalDate, value: Decimal, now: Date,
        zoneName: String
    ) async throws -> DayWriteOutcome<EntryRecord> {
        let inserted = try await pool.queryRow(
            """
            WITH habit AS (SELECT id FROM habits WHERE user_id = \(userID) AND id = \(habitID) AND deleted_at IS NULL \
            AND live_from <= \(date)), \
            sequence AS (UPDATE users SET change_seq = change_seq + 1 \
            WHERE user_id = \(userID) AND time_zone = \(zoneName) AND EXISTS (SELECT FROM habit) RETURNING change_seq) \
            INSERT INTO entries (user_id, id, habit_id, local_date, value, created_at, change_seq) \
            SELECT \(userID), coalesce(\(entryID as UUID?)::uuid, gen_random_uuid()), habit.id, \(date), \(value), \
            \(now), sequence.change_seq FROM habit, sequence \
            ON CONFLICT (user_id, id) DO NOTHING RETURNING *
            """)
        if let inserted { return .written(try EntryRecord(row: inserted)) }
        // Why nothing was written, in the order the statement checks: the user, their zone, a retry, the habit.
        guard let user = try await pool.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)") else {
            throw HabitsError.accountDeleted(userID)
        }
        let storedZoneName = try user.decode(0, as: String.self)
        if storedZoneName != zoneName { return .zoneChanged(storedZoneName: storedZoneName) }
        if let entryID, let existing = try await pool.queryRow(
            "SELECT * FROM entries WHERE user_id = \(userID) AND id = \(entryID)")
        {
            return .written(try EntryRecord(row: existing))
        }
        guard
            let habit = try await pool.queryRow(
                "SELECT deleted_at IS NOT NULL FROM habits WHERE user_id = \(userID) AND id = \(habitID)")
        else { throw HabitsError.habitNotFound(habitID) }
        if try habit.decode(0, as: Bool.self) { throw HabitsError.habitDeleted(habitID) }
        // A live habit: the date is before its first week.
        return try await markDoneBeforeFirstWeek(
            user: userID, habit: habitID, entry: entryID, date: date, value: value, now: now, zoneName: zoneName)
    }

    /// ``markDone(user:habit:entry:date:value:now:zoneName:)`` of a date before the habit's `live_from`: adds the
    /// entry and moves the habit's first week back to the date's, in one transaction under the user's lock (where
    /// every condition of the one statement is checked again: the zone, a retry, the habit).
    private func markDoneBeforeFirstWeek(
        user userID: UUID, habit habitID: UUID, entry entryID: UUID?, date: LocalDate, value: Decimal, now: Date,
        zoneName: String
    ) async throws -> DayWriteOutcome<EntryRecord> {
        try await write(user: userID) { transaction, sequence in
            let storedZoneName = try required(
                try await transaction.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)")
            ).decode(0, as: String.self)
            if storedZoneName != zoneName { return .zoneChanged(storedZoneName: storedZoneName) }
            if let entryID, let existing = try await transaction.queryRow(
                "SELECT * FROM entries WHERE user_id = \(userID) AND id = \(entryID)")
            {
                return .written(try EntryRecord(row: existing))
            }
            guard let current = try await habit(transaction, user: userID, id: habitID) else {
                throw HabitsError.habitNotFound(habitID)
            }
            if current.isDeleted { throw HabitsError.habitDeleted(habitID) }
            let inserted = try await transaction.queryRow(
                """
                INSERT INTO entries (user_id, id, habit_id, local_date, value, created_at, change_seq) \
                VALUES (\(userID), coalesce(\(entryID as UUID?)::uuid, gen_random_uuid()), \(habitID), \(date), \(value), \
                \(now), \(sequence)) RETURNING *
                """)
            try await moveFirstWeekBack(transaction, user: userID, to: [habitID: date], sequence: sequence, now: now)
            return .written(try EntryRecord(row: try required(inserted)))
        }
    }

    /// Tombstones every entry of a live habit on `date`, provided the user's stored zone is still `zoneName` (as in
    /// ``markDone(user:habit:entry:date:value:now:zoneName:)``); how many there were. One statement when there were
    /// some.
    public func markNotDone(
        user userID: UUID, habit habitID: UUID, date: LocalDate, now: Date, zoneName: String
    ) async throws -> DayWriteOutcome<Int> {
        let removed = try await pool.query(
            """
            WITH day AS (SELECT e.id FROM entries e JOIN habits h ON h.user_id = e.user_id AND h.id = e.habit_id \
            WHERE e.user_id = \(userID) AND e.habit_id = \(habitID) AND e.local_date = \(date) \
            AND e.deleted_at IS NULL AND h.deleted_at IS NULL), \
            sequence AS (UPDATE users SET change_seq = change_seq + 1 \
            WHERE user_id = \(userID) AND time_zone = \(zoneName) AND EXISTS (SELECT FROM day) RETURNING change_seq) \
            UPDATE entries e SET deleted_at = \(now), change_seq = sequence.change_seq FROM sequence \
            WHERE e.user_id = \(userID) AND e.id IN (SELECT id FROM day) AND e.deleted_at IS NULL RETURNING e.id
            """
        ).count
        if removed > 0 { return .written(removed) }
        // Why nothing was removed, in the order the statement checks: the user, their zone, the habit.
        guard let user = try await pool.queryRow("SELECT time_zone FROM users WHERE user_id = \(userID)") else {
            throw HabitsError.accountDeleted(userID)
        }
        let storedZoneName = try user.decode(0, as: String.self)
        if storedZoneName != zoneName { return .zoneChanged(storedZoneName: storedZoneName) }
        guard let habit = try await habit(user: userID, id: habitID) else { throw HabitsError.habitNotFound(habitID) }
        if habit.isDeleted { throw HabitsError.habitDeleted(habitID) }
        return .written(0)
    }

    /// Live entries in `first...last` (of one habit, or all), ordered by date, then id, after `position`.
    public func entries(
        user userID: UUID, habit habitID: UUID?, from first: LocalDate, through last: LocalDate,
        after position: EntryPagePosition?, limit: Int
    ) async throws -> [EntryRecord] {
        let start = position ?? EntryPagePosition(date: first, id: UUID.min)
        return try await pool.query(
            """
            SELECT * FROM entries WHERE user_id = \(userID) AND local_date BETWEEN \(first) AND \(last) \
            AND deleted_at IS NULL AND (\(habitID as UUID?)::uuid IS NULL OR habit_id = \(habitID as UUID?)) \
            AND (local_date, id) > (\(start.date), \(start.id)) ORDER BY local_date, id LIMIT \(limit)
            """
        ).map(EntryRecord.init(row:))
    }

    /// A page of the export: the user's entries, tombstones included, ordered by date, habit, creation and id, after
    /// the entry `after` (the last of the previous page; `nil` for the first page).
    ///
    /// Keyset pagination on the `entries_export` index: each page is one ordered range scan of `limit` index entries,
    /// however far in it starts (no other condition, which could make the planner scan per habit and sort). The
    /// position is read from the previous page's last row, so no timestamp is rounded on the way through Swift.
    public func exportEntries(user userID: UUID, after: UUID?, limit: Int) async throws -> [EntryRecord] {
        guard let after else {
            return try await pool.query(
                """
                SELECT * FROM entries WHERE user_id = \(userID) \
                ORDER BY local_date, habit_id, created_at, id LIMIT \(limit)
                """
            ).map(EntryRecord.init(row:))
        }
        return try await pool.query(
            """
            SELECT * FROM entries e WHERE e.user_id = \(userID) \
            AND (e.local_date, e.habit_id, e.created_at, e.id) > (SELECT c.local_date, c.habit_id, c.created_at, c.id \
            FROM entries c WHERE c.user_id = \(userID) AND c.id = \(after)) \
            ORDER BY e.local_date, e.habit_id, e.created_at, e.id LIMIT \(limit)
            """
        ).map(EntryRecord.init(row:))
    }

    /// Live entries of some habits in `first...last`, counted and summed per habit and ISO week (in no order).
    ///
    /// The week's Monday is integer arithmetic on the date (0001-01-01 was a Monday), which costs Postgres a fraction
    /// of `extract(isodow ...)` for each of the hundreds of rows a score history reads.
    public func weekTotals(
        user userID: UUID, habits habitIDs: [UUID], from first: LocalDate, through last: LocalDate
    ) async throws -> [WeekTotal] {
        try await pool.query(
            """
            SELECT habit_id, local_date - (local_date - date '0001-01-01') % 7 AS monday, count(*), sum(value) \
            FROM entries WHERE user_id = \(userID) AND habit_id = ANY(\(habitIDs)) \
            AND local_date BETWEEN \(first) AND \(last) AND deleted_at IS NULL \
            GROUP BY habit_id, monday
            """
        ).map { row in
            WeekTotal(
                habitID: try row.decode(0), week: IsoWeek(containing: try row.decode(1)),
                count: Int(try row.decode(2, as: Int64.self)), valueSum: try row.decode(3))
        }
    }

    /// Live entries of all the user's habits in `first...last` (whole ISO weeks) counted per habit and week (in no
    /// order), as of the user's change-sequence value read in the same statement (every write up to it is counted):
    /// what a score history scores. Without sums and a filter on habits (the caller keeps the habits it scores),
    /// Postgres reads the smaller `entries_by_day` and hashes the groups.
    ///
    /// With `since` (the `asOf` of counts the caller keeps), only the weeks in which an entry was added or removed
    /// after it, each counted whole (0 when emptied): found through `entries_changes`, so a check-in since costs one
    /// week whatever the range. `nil` for a user the service does not hold.
    ///
    /// The same statement answers the user's stored zone and habit-list version (``habitListVersion(_:)``, one
    /// backward index step), so that a score history whose habits are kept is this one statement.
    ///
    /// The entries changed since are read in a subquery of their own (`OFFSET 0` keeps the planner from merging it):
    /// with the date range beside `change_seq > $n` the generic plan scanned the user's entries of the range by date
    /// and filtered them (0.45 ms for 400 entries when none had changed), where `entries_changes` finds none at once.
    public func weekCounts(
        user userID: UUID, from first: LocalDate, through last: LocalDate, changedSince since: Int64? = nil
    ) async throws -> ScoreHistoryCounts? {
        // The user's row answers the values even when nothing was counted; a user without one gets no row.
        let rows =
            if let since {
                try await pool.query(
                    """
                    SELECT u.change_seq, u.time_zone, \
                    coalesce((SELECT max(change_seq) FROM habits WHERE user_id = u.user_id), 0), c.* \
                    FROM users u LEFT JOIN LATERAL ( \
                    SELECT t.habit_id, t.monday, (SELECT count(*) FROM entries e WHERE e.user_id = \(userID) \
                    AND e.habit_id = t.habit_id AND e.local_date BETWEEN t.monday AND t.monday + 6 \
                    AND e.deleted_at IS NULL) AS count \
                    FROM (SELECT DISTINCT habit_id, local_date - (local_date - date '0001-01-01') % 7 AS monday \
                    FROM (SELECT habit_id, local_date FROM entries \
                    WHERE user_id = \(userID) AND change_seq > \(since) OFFSET 0) changed \
                    WHERE local_date BETWEEN \(first) AND \(last)) t) c ON true \
                    WHERE u.user_id = \(userID)
                    """)
            } else {
                try await pool.query(
                    """
                    SELECT u.change_seq, u.time_zone, \
                    coalesce((SELECT max(change_seq) FROM habits WHERE user_id = u.user_id), 0), c.* \
                    FROM users u LEFT JOIN LATERAL ( \
                    SELECT habit_id, local_date - (local_date - date '0001-01-01') % 7 AS monday, count(*) AS count \
                    FROM entries WHERE user_id = \(userID) AND local_date BETWEEN \(first) AND \(last) \
                    AND deleted_at IS NULL GROUP BY habit_id, monday) c ON true \
                    WHERE u.user_id = \(userID)
                    """)
            }
        guard let userRow = rows.first else { return nil }
        var counts = WeekCounts(asOf: try userRow.decode(0), counts: [])
        for row in rows {
            guard let habitID = try row.decode(3, as: UUID?.self) else { continue }
            counts.counts.append(
                .init(
                    habitID: habitID, monday: Int32(try row.decode(4, as: LocalDate.self).daysSinceEpoch),
                    count: Int32(try row.decode(5, as: Int64.self))))
        }
        return ScoreHistoryCounts(
            zoneName: try userRow.decode(1), habitListVersion: try userRow.decode(2), counts: counts)
    }

    /// The whole totals of the weeks (within the range) in which an entry of `habitIDs` was added or removed after
    /// change-sequence value `since`; a week whose entries are all gone comes with count 0. Found through
    /// `entries_changes` (the changed entries in a subquery of their own, as in
    /// ``weekCounts(user:from:through:changedSince:)``), so a check-in costs one week whatever the range.
    public func changedWeekTotals(
        user userID: UUID, habits habitIDs: [UUID], from first: LocalDate, through last: LocalDate, since: Int64
    ) async throws -> [WeekTotal] {
        try await pool.query(
            """
            WITH touched AS ( \
            SELECT DISTINCT habit_id, local_date - (extract(isodow FROM local_date)::integer - 1) AS monday \
            FROM (SELECT habit_id, local_date FROM entries \
            WHERE user_id = \(userID) AND change_seq > \(since) OFFSET 0) changed \
            WHERE habit_id = ANY(\(habitIDs)) AND local_date BETWEEN \(first) AND \(last)) \
            SELECT t.habit_id, t.monday, count(e.id), coalesce(sum(e.value), 0) FROM touched t \
            LEFT JOIN entries e ON e.user_id = \(userID) AND e.habit_id = t.habit_id AND e.deleted_at IS NULL \
            AND e.local_date BETWEEN greatest(t.monday, \(first)) AND least(t.monday + 6, \(last)) \
            GROUP BY t.habit_id, t.monday ORDER BY t.habit_id, t.monday
            """
        ).map { row in
            WeekTotal(
                habitID: try row.decode(0), week: IsoWeek(containing: try row.decode(1)),
                count: Int(try row.decode(2, as: Int64.self)), valueSum: try row.decode(3))
        }
    }

    /// Which of `habitIDs` the user has (deleted ones included).
    public func existingHabitIDs(user userID: UUID, among habitIDs: [UUID]) async throws -> Set<UUID> {
        Set(
            try await pool.query("SELECT id FROM habits WHERE user_id = \(userID) AND id = ANY(\(habitIDs))")
                .map { try $0.decode(0, as: UUID.self) })
    }
}
