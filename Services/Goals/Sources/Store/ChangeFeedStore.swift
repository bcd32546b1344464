public import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// A position in a user's change feed: after the row of `kind` and `id` stamped with `sequence`. One write can stamp
/// several rows with one sequence value (a goal archived with its children), so the kind and id break ties.
public struct ChangeCursor: Sendable, Hashable, Comparable {
    public enum Kind: Int, Sendable, Comparable {
        case start = 0, goal = 1, assessment = 2
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

    /// The `(change_seq, id)` bound after which a table of `kind` continues.
    func bound(for kind: Kind) -> (sequence: Int64, id: UUID) {
        if kind == self.kind { return (sequence, id) }
        return kind > self.kind ? (sequence - 1, UUID.max) : (sequence, UUID.max)
    }
}

/// One changed resource in its latest state (a tombstone when deleted).
public enum ChangedResource: Sendable, Hashable {
    case goal(GoalRecord, links: [GoalLinkRecord])
    case assessment(AssessmentRecord)

    public var cursor: ChangeCursor {
        switch self {
        case .goal(let goal, _): ChangeCursor(sequence: goal.changeSequence, kind: .goal, id: goal.id)
        case .assessment(let assessment):
            ChangeCursor(sequence: assessment.changeSequence, kind: .assessment, id: assessment.id)
        }
    }
}

extension GoalsStore {
    /// Up to `limit` resources changed after `cursor`, in feed order, and whether more follow.
    public func changes(user userID: UUID, after cursor: ChangeCursor, limit: Int) async throws
        -> (changes: [ChangedResource], hasMore: Bool)
    {
        let fetch = limit + 1
        let goal = cursor.bound(for: .goal)
        let assessment = cursor.bound(for: .assessment)
        let goals = try await pool.query(
            """
            SELECT * FROM goal_details WHERE user_id = \(userID) AND change_seq >= \(goal.sequence) \
            AND (change_seq, id) > (\(goal.sequence), \(goal.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """
        ).map(GoalRecord.init(row:))
        let links = try await pool.query(
            """
            SELECT * FROM goal_links WHERE user_id = \(userID) AND goal_id = ANY(\(goals.map(\.id))::uuid[]) \
            ORDER BY linked_from, habit_id
            """
        ).map(GoalLinkRecord.init(row:))
        let linksByGoal = Dictionary(grouping: links, by: \.goalID)
        let assessments = try await pool.query(
            """
            SELECT * FROM assessments WHERE user_id = \(userID) AND change_seq >= \(assessment.sequence) \
            AND (change_seq, id) > (\(assessment.sequence), \(assessment.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """
        ).map { ChangedResource.assessment(try AssessmentRecord(row: $0)) }
        let merged = (goals.map { ChangedResource.goal($0, links: linksByGoal[$0.id] ?? []) } + assessments)
            .sorted { $0.cursor < $1.cursor }
        return (Array(merged.prefix(limit)), merged.count > limit)
    }

    /// Everything of a user's, deleted goals and assessments included, for the data export.
    public func export(user userID: UUID) async throws
        -> (goals: [GoalRecord], links: [UUID: [GoalLinkRecord]], assessments: [AssessmentRecord])
    {
        let goals = try await pool.query(
            "SELECT * FROM goal_details WHERE user_id = \(userID) ORDER BY created_seq"
        ).map(GoalRecord.init(row:))
        let links = try await pool.query(
            "SELECT * FROM goal_links WHERE user_id = \(userID) ORDER BY linked_from, habit_id"
        ).map(GoalLinkRecord.init(row:))
        let assessments = try await pool.query(
            "SELECT * FROM assessments WHERE user_id = \(userID) ORDER BY local_date, created_at"
        ).map(AssessmentRecord.init(row:))
        return (goals, Dictionary(grouping: links, by: \.goalID), assessments)
    }
}
