public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres
public import HabitFlowServiceKit

// Reads for week views, score history and leaderboards, for one user or a batch of users.

/// What one user's week view is made of, read in two statements whatever the length of the user's history.
public struct WeekViewData: Sendable {
    public var zone: UserTimeZone
    /// Live categories in display order.
    public var categories: [CategoryRecord]
    /// The habits live in the week, in creation order.
    public var habits: [HabitRecord]
    /// Entries per habit and day of the week, Monday first.
    public var dayCounts: [UUID: [Int]]
}

/// What changed in a kept week view's week since its version (``HabitsStore/weekViewChanges(user:week:since:)``).
public struct WeekViewChanges: Sendable {
    public struct DayCount: Sendable {
        public var habitID: UUID
        /// 0 for Monday.
        public var day: Int
        public var count: Int
    }

    /// The user's version now, read in the same statement as the changes.
    public var version: UserVersion
    /// The version the changes are counted from, and the week they are counted in.
    public var since: Int64
    public var week: IsoWeek
    /// A category or habit (or a habit's targets) was written since: the week must be read anew.
    public var reshaped: Bool
    /// The whole count of each habit's day of `week` on which an entry was added or removed since.
    public var dayCounts: [DayCount]

    /// `data` (read as of `since`, in `week` and the same zone) brought up to `version`, or `nil` when it must be read
    /// anew. A count of a habit the view does not show is left out: entries of a habit not live in the week move its
    /// first week, which stamps the habit (and makes the changes `reshaped`).
    public func applied(to data: WeekViewData, readAs dataVersion: UserVersion, in dataWeek: IsoWeek) -> WeekViewData? {
        guard !reshaped, dataVersion.changeSequence == since, dataVersion.zoneName == version.zoneName, dataWeek == week
        else { return nil }
        var data = data
        for change in dayCounts where (0..<7).contains(change.day) {
            data.dayCounts[change.habitID]?[change.day] = change.count
        }
        return data
    }
}

extension HabitsStore {
    /// The user's live categories, then the habits live in `week` with their entries' days. `zone` is the one the
    /// caller read with the user's version (``userVersion(_:now:)``), which picked the week.
    ///
    /// Both statements use indexes led by the user (entries by habit and day), so the cost does not grow with the
    /// user's history.
    public func weekViewData(user userID: UUID, zone: UserTimeZone, week: IsoWeek) async throws -> WeekViewData {
        let categories = try await liveCategories(pool, of: [userID])[userID] ?? []
        var habits: [HabitRecord] = []
        var dayCounts: [UUID: [Int]] = [:]
        for row in try await pool.query(
            """
            SELECT h.*, ARRAY(SELECT e.local_date - \(week.monday) FROM entries e WHERE e.user_id = h.user_id \
            AND e.habit_id = h.id AND e.local_date BETWEEN \(week.monday) AND \(week.sunday) AND e.deleted_at IS NULL) \
            AS week_days FROM habit_details h WHERE h.user_id = \(userID) AND h.live_from <= \(week.sunday) \
            AND (h.deleted_on IS NULL OR h.deleted_on > \(week.sunday)) ORDER BY h.created_seq
            """)
        {
            let habit = try HabitRecord(row: row)
            var counts = Array(repeating: 0, count: 7)
            for day in try row.decode("week_days", as: [Int32].self) where (0..<7).contains(day) { counts[Int(day)] += 1 }
            habits.append(habit)
            dayCounts[habit.id] = counts
        }
        return WeekViewData(zone: zone, categories: categories, habits: habits, dayCounts: dayCounts)
    }

    /// One user's stored zone with ``habits(of:liveBetween:and:)``, in one statement; `nil` for a user the service does
    /// not know (a new or a deleted account).
    public func zoneAndHabits(
        of userID: UUID, liveBetween first: IsoWeek, and last: IsoWeek
    ) async throws -> (zoneName: String, habits: [HabitRecord])? {
        try await knownUserRows(
            """
            SELECT u.time_zone, h.* FROM users u LEFT JOIN LATERAL (SELECT * FROM habit_details \
            WHERE user_id = u.user_id AND live_from <= \(last.sunday) \
            AND (deleted_on IS NULL OR deleted_on > \(first.sunday))) h ON true \
            WHERE u.user_id = \(userID) ORDER BY h.created_seq
            """, user: { try $0.decode("time_zone", as: String.self) }, HabitRecord.init(row:)
        ).map { (zoneName: $0.user, habits: $0.records) }
    }

    /// The user's version and what changed in `week` since change-sequence value `since` (the version of a week view
    /// the caller keeps), in one statement: whether a category or habit was written since (its rows, or a habit's
    /// targets, carry the value of every write to them), and for each day of the week on which an entry was added or
    /// removed since, that habit's whole count of the day. `nil` for a user the service does not hold.
    ///
    /// The changed entries are found through `entries_changes` in a subquery of their own (`OFFSET 0`, as in
    /// ``weekCounts(user:from:through:changedSince:)``), so a check-in since costs one count of one day; while the
    /// version stands, the habits and categories are not looked at (the `EXISTS` are evaluated only when asked).
    public func weekViewChanges(user userID: UUID, week: IsoWeek, since: Int64) async throws -> WeekViewChanges? {
        let rows = try await pool.query(
            """
            SELECT u.time_zone, u.change_seq, u.change_seq > \(since) \
            AND (EXISTS (SELECT 1 FROM habits WHERE user_id = \(userID) AND change_seq > \(since)) \
            OR EXISTS (SELECT 1 FROM categories WHERE user_id = \(userID) AND change_seq > \(since))) AS reshaped, \
            c.habit_id, c.day, c.count FROM users u LEFT JOIN LATERAL ( \
            SELECT t.habit_id, t.local_date - \(week.monday) AS day, (SELECT count(*) FROM entries e \
            WHERE e.user_id = \(userID) AND e.habit_id = t.habit_id AND e.local_date = t.local_date \
            AND e.deleted_at IS NULL) AS count \
            FROM (SELECT DISTINCT habit_id, local_date FROM (SELECT habit_id, local_date FROM entries \
            WHERE user_id = \(userID) AND change_seq > \(since) OFFSET 0) changed \
            WHERE local_date BETWEEN \(week.monday) AND \(week.sunday)) t) c ON true \
            WHERE u.user_id = \(userID)
            """)
        guard let userRow = rows.first else { return nil }
        var changes = WeekViewChanges(
            version: UserVersion(zoneName: try userRow.decode(0), changeSequence: try userRow.decode(1)),
            since: since, week: week, reshaped: try userRow.decode(2), dayCounts: [])
        for row in rows {
            guard let habitID = try row.decode(3, as: UUID?.self) else { continue }
            changes.dayCounts.append(
                .init(habitID: habitID, day: Int(try row.decode(4, as: Int32.self)), count: Int(try row.decode(5, as: Int64.self))))
        }
        return changes
    }

    /// Habits live at some time in `first...last`, per user, ordered by creation. Which weeks each one counts in is
    /// ``HabitRecord/isLive(in:)``'s business.
    public func habits(
        of userIDs: [UUID], liveBetween first: IsoWeek, and last: IsoWeek
    ) async throws -> [UUID: [HabitRecord]] {
        var habits: [UUID: [HabitRecord]] = [:]
        for row in try await pool.query(
            """
            SELECT * FROM habit_details WHERE user_id = ANY(\(userIDs)) AND live_from <= \(last.sunday) \
            AND (deleted_on IS NULL OR deleted_on > \(first.sunday)) ORDER BY user_id, created_seq
            """)
        {
            habits[try row.decode("user_id", as: UUID.self), default: []].append(try HabitRecord(row: row))
        }
        return habits
    }

    /// Live categories per user, in display order.
    func liveCategories(_ database: some PostgresQueryable, of userIDs: [UUID]) async throws -> [UUID: [CategoryRecord]] {
        var categories: [UUID: [CategoryRecord]] = [:]
        for row in try await database.query(
            """
            SELECT * FROM categories WHERE user_id = ANY(\(userIDs)) AND deleted_at IS NULL \
            ORDER BY user_id, position, created_at, id
            """)
        {
            categories[try row.decode("user_id", as: UUID.self), default: []].append(try CategoryRecord(row: row))
        }
        return categories
    }

    public func liveCategories(of userIDs: [UUID]) async throws -> [UUID: [CategoryRecord]] {
        try await liveCategories(pool, of: userIDs)
    }

    /// The versions (stored zone and change-sequence value) of those of `userIDs` the service knows.
    ///
    /// One primary-key probe per user: a lookup in a fenced `LATERAL` (`OFFSET 0`) per element of the array. The
    /// generic plan of `user_id = ANY($1)`, which the pool's connections always use, scans the whole table while it
    /// is small (1,000 users: 0.13 ms in `EXPLAIN ANALYZE`, against 0.02–0.05 ms for the probes).
    public func versions(of userIDs: [UUID]) async throws -> [UUID: UserVersion] {
        var versions: [UUID: UserVersion] = [:]
        for row in try await pool.query(
            """
            SELECT u.user_id, u.time_zone, u.change_seq FROM unnest(\(userIDs)::uuid[]) AS w(user_id) \
            CROSS JOIN LATERAL (SELECT * FROM users WHERE user_id = w.user_id OFFSET 0) u
            """)
        {
            versions[try row.decode(0, as: UUID.self)] = UserVersion(
                zoneName: try row.decode(1, as: String.self), changeSequence: try row.decode(2, as: Int64.self))
        }
        return versions
    }

    /// The stored zones of those of `userIDs` the service knows (a primary-key probe per user, as in ``versions(of:)``).
    public func timeZones(of userIDs: [UUID]) async throws -> [UUID: UserTimeZone] {
        var zones: [UUID: UserTimeZone] = [:]
        for row in try await pool.query(
            """
            SELECT u.user_id, u.time_zone FROM unnest(\(userIDs)::uuid[]) AS w(user_id) \
            CROSS JOIN LATERAL (SELECT * FROM users WHERE user_id = w.user_id OFFSET 0) u
            """)
        {
            zones[try row.decode(0, as: UUID.self)] = .stored(try row.decode(1, as: String.self))
        }
        return zones
    }

    /// Live entries per user and habit, each user in their own week.
    public func completions(in weeks: [UUID: IsoWeek]) async throws -> [UUID: [UUID: Int]] {
        let userIDs = Array(weeks.keys)
        let mondays = userIDs.map { Int32(weeks[$0]?.monday.daysSinceEpoch ?? 0) }
        var completions: [UUID: [UUID: Int]] = [:]
        for row in try await pool.query(
            """
            SELECT e.user_id, e.habit_id, count(*) \
            FROM unnest(\(userIDs)::uuid[], \(mondays)::integer[]) AS w(user_id, monday) \
            JOIN entries e ON e.user_id = w.user_id AND e.deleted_at IS NULL \
            AND e.local_date BETWEEN DATE '1970-01-01' + w.monday AND DATE '1970-01-01' + w.monday + 6 \
            GROUP BY e.user_id, e.habit_id
            """)
        {
            completions[try row.decode(0, as: UUID.self), default: [:]][try row.decode(1, as: UUID.self)] =
                Int(try row.decode(2, as: Int64.self))
        }
        return completions
    }
}
