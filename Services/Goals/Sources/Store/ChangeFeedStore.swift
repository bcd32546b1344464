public import Foundation
public import HabitFlowServiceAPI
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// What the feed pages through, in the order one write's rows are listed.
public enum FeedKind: Int, ChangeKind {
    case start = 0, goal = 1, assessment = 2, task = 3, review = 4
}

public typealias ChangeCursor = HabitFlowServiceAPI.ChangeCursor<FeedKind>

/// One changed resource in its latest state (a tombstone when deleted).
public enum ChangedResource: Sendable, Hashable {
    case goal(GoalRecord, links: [GoalLinkRecord])
    case assessment(AssessmentRecord)
    case task(TaskRecord)
    case review(ReviewRecord)
    /// A goal shared with the user that they can no longer see, whose row is gone (its creator's account was
    /// deleted): a tombstone with only its id (the creator's is no longer kept: `owner` is nil).
    case sharedGoalRemoved(id: UUID, owner: UUID?, sequence: Int64)

    public var cursor: ChangeCursor {
        switch self {
        case .goal(let goal, _): ChangeCursor(sequence: goal.changeSequence, kind: .goal, id: goal.id)
        case .sharedGoalRemoved(let id, _, let sequence): ChangeCursor(sequence: sequence, kind: .goal, id: id)
        case .assessment(let assessment):
            ChangeCursor(sequence: assessment.changeSequence, kind: .assessment, id: assessment.id)
        case .task(let task): ChangeCursor(sequence: task.changeSequence, kind: .task, id: task.id)
        case .review(let review): ChangeCursor(sequence: review.changeSequence, kind: .review, id: review.id)
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
        let task = cursor.bound(for: .task)
        let review = cursor.bound(for: .review)
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
        let tasks = try await pool.query(
            """
            SELECT * FROM tasks WHERE user_id = \(userID) AND change_seq >= \(task.sequence) \
            AND (change_seq, id) > (\(task.sequence), \(task.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """
        ).map { ChangedResource.task(try TaskRecord(row: $0)) }
        let reviewRows = try await pool.query(
            """
            SELECT * FROM reviews WHERE user_id = \(userID) AND change_seq >= \(review.sequence) \
            AND (change_seq, id) > (\(review.sequence), \(review.id)) ORDER BY change_seq, id LIMIT \(fetch)
            """)
        let reviews = try await withRatings(pool, user: userID, reviewRows).map(ChangedResource.review)
        let shared = try await sharedGoalChanges(user: userID, after: goal, limit: fetch)
        let merged = (goals.map { ChangedResource.goal($0, links: linksByGoal[$0.id] ?? []) } + shared + assessments
            + tasks + reviews)
            .sorted { $0.cursor < $1.cursor }
        return (Array(merged.prefix(limit)), merged.count > limit)
    }

    /// The goals shared with the user that changed after `bound`, as the user sees them (`shared_goal_views`,
    /// stamped with the user's own change values): in their latest state while shared, then once as a tombstone
    /// when the user lost access (the partnership ended, the creator unshared or deleted it, or their account went).
    private func sharedGoalChanges(user userID: UUID, after bound: (sequence: Int64, id: UUID), limit: Int) async throws
        -> [ChangedResource]
    {
        let views = try await pool.query(
            """
            SELECT owner_id, goal_id, change_seq, removed FROM shared_goal_views WHERE user_id = \(userID) \
            AND change_seq >= \(bound.sequence) AND (change_seq, goal_id) > (\(bound.sequence), \(bound.id)) \
            ORDER BY change_seq, goal_id LIMIT \(limit)
            """
        ).map {
            (owner: try $0.decode(0, as: UUID.self), goal: try $0.decode(1, as: UUID.self),
                sequence: try $0.decode(2, as: Int64.self), removed: try $0.decode(3, as: Bool.self))
        }
        guard !views.isEmpty else { return [] }
        let owners = Array(Set(views.map(\.owner)))
        let ids = views.map(\.goal)
        let goals = Dictionary(
            try await pool.query(
                "SELECT * FROM goal_details WHERE user_id = ANY(\(owners)::uuid[]) AND id = ANY(\(ids)::uuid[])"
            ).map { let goal = try GoalRecord(row: $0); return (goal.id, goal) }
        ) { first, _ in first }
        let links = Dictionary(
            grouping: try await pool.query(
                """
                SELECT * FROM goal_links WHERE user_id = ANY(\(owners)::uuid[]) AND goal_id = ANY(\(ids)::uuid[]) \
                ORDER BY linked_from, habit_id
                """
            ).map(GoalLinkRecord.init(row:)), by: \.goalID)
        return views.map { view in
            guard var goal = goals[view.goal], goal.ownerID == view.owner else {
                return .sharedGoalRemoved(
                    id: view.goal, owner: view.owner == Self.deletedCreator ? nil : view.owner, sequence: view.sequence)
            }
            goal.changeSequence = view.sequence
            if view.removed, goal.deletedAt == nil { goal.deletedAt = goal.updatedAt }
            return .goal(goal, links: view.removed ? [] : links[view.goal] ?? [])
        }
    }

    /// Everything of a user's, deleted goals, assessments, tasks and reviews included, for the data export.
    public func export(user userID: UUID) async throws
        -> (
            goals: [GoalRecord], links: [UUID: [GoalLinkRecord]], assessments: [AssessmentRecord], tasks: [TaskRecord],
            reviews: [ReviewRecord]
        )
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
        let tasks = try await pool.query(
            "SELECT * FROM tasks WHERE user_id = \(userID) ORDER BY week_start, created_seq"
        ).map(TaskRecord.init(row:))
        let reviews = try await withRatings(
            pool, user: userID,
            try await pool.query("SELECT * FROM reviews WHERE user_id = \(userID) ORDER BY review_date, created_seq"))
        return (goals, Dictionary(grouping: links, by: \.goalID), assessments, tasks, reviews)
    }
}
