public import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// A position in a user's change feed: after the row of `kind` and `id` stamped with `sequence`. One write can stamp
/// several rows with one sequence value (a category deleted with its habits), so the kind and id break ties.
public struct ChangeCursor: Sendable, Hashable, Comparable {
    public enum Kind: Int, Sendable, Comparable {
        case start = 0, category = 1, habit = 2, entry = 3
        public static func < (lhs: Kind, rhs: Kind) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    public var sequence: Int64
    public var kind: Kind
    public var id: UUID

    /// Before everything: a full sync.
    public static let beginning = ChangeCursor(sequence: 0, kind: .start, id: UUID.min)

    public init(sequence: Int64, kind: Kind, id: UUID) {
        self.sequence = sequence
        self.kind = kind
        self.id = id
    }

    public static func < (lhs: ChangeCursor, rhs: ChangeCursor) -> Bool {
        (lhs.sequence, lhs.kind, lhs.id.lowercasedString) < (rhs.sequence, rhs.kind, rhs.id.lowercasedString)
    }

    /// The `(change_seq, id)` bound after which a table of `kind` continues: the same sequence value continues
    /// within the cursor's own kind, and entirely in later kinds.
    func bound(for kind: Kind) -> (sequence: Int64, id: UUID) {
        if kind == self.kind { return (sequence, id) }
        return kind > self.kind ? (sequence - 1, UUID.max) : (sequence, UUID.max)
    }
}

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
