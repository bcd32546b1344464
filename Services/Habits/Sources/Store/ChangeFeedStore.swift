public import Foundation
public import HabitFlowServiceAPI
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// What the feed pages through, in the order one write's rows are listed.
public enum FeedKind: Int, ChangeKind {
    case start = 0, category = 1, habit = 2, entry = 3
}

public typealias ChangeCursor = HabitFlowServiceAPI.ChangeCursor<FeedKind>

/// One changed resource in its latest state (a tombstone when deleted).
public enum ChangedResource: Sendable, Hashable {
    case category(CategoryRecord)
    case habit(HabitRecord)
    case entry(EntryRecord)

    public var cursor: ChangeCursor {
        switch self {
        case .category(let category): ChangeCursor(sequence: category.changeSequence, kind: .category, id: category.id)
        case .habit(let habit): ChangeCursor(sequence: habit.changeSequence, kind: .habit, id: habit.id)
        case .entry(let entry): ChangeCursor(sequence: entry.changeSequence, kind: .entry, id: entry.id)
        }
    }
}

extension HabitsStore {
    /// Up to `limit` resources changed after `cursor`, in feed order, and whether more follow.
    public func changes(user userID: UUID, after cursor: ChangeCursor, limit: Int) async throws
        -> (changes: [ChangedResource], hasMore: Bool)
    {
        // Each table's next `limit + 1` rows, merged: enough to fill the page and to know whether more follow.
        let fetch = limit + 1
        let category = cursor.bound(for: .category)
        let habit = cursor.bound(for: .habit)
        let entry = cursor.bound(for: .entry)
        let categories = try await pool.query(
            """
            SELECT * FROM categories WHERE user_id = \(userID) AND change_seq >= \(category.sequence) \
            AND (change_seq, id) > (\(category.sequence), \(category.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """
        ).map { ChangedResource.category(try CategoryRecord(row: $0)) }
        let habits = try await pool.query(
            """
            SELECT * FROM habit_details WHERE user_id = \(userID) AND change_seq >= \(habit.sequence) \
            AND (change_seq, id) > (\(habit.sequence), \(habit.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """
        ).map { ChangedResource.habit(try HabitRecord(row: $0)) }
        let entries = try await pool.query(
            """
            SELECT * FROM entries WHERE user_id = \(userID) AND change_seq >= \(entry.sequence) \
            AND (change_seq, id) > (\(entry.sequence), \(entry.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """
        ).map { ChangedResource.entry(try EntryRecord(row: $0)) }
        let merged = (categories + habits + entries).sorted { $0.cursor < $1.cursor }
        return (Array(merged.prefix(limit)), merged.count > limit)
    }
}
