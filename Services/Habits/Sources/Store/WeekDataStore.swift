public import Foundation
internal import HabitFlowPostgres

// Reads for week views, score history and leaderboards, for one user or a batch of users.

extension HabitsStore {
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

    /// The stored zones of those of `userIDs` the service knows.
    public func timeZones(of userIDs: [UUID]) async throws -> [UUID: UserTimeZone] {
        var zones: [UUID: UserTimeZone] = [:]
        for row in try await pool.query("SELECT user_id, time_zone FROM users WHERE user_id = ANY(\(userIDs))") {
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
