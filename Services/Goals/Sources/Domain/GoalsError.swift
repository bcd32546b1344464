public import Foundation

/// What the goals rules refuse. The RPC layer turns each case into its gRPC status (`GoalsError+RPC.swift`).
public enum GoalsError: Error, Hashable {
    /// Also the answer for another user's goal: ids leak nothing.
    case goalNotFound(UUID)
    case assessmentNotFound(UUID)
    /// Also the answer for another user's task, and for a deleted one.
    case taskNotFound(UUID)
    /// Also the answer for another user's review, and for a deleted one.
    case reviewNotFound(UUID)
    /// A habit that is not the caller's (the habits service said NOT_FOUND).
    case habitNotFound(UUID)
    case habitDeleted(UUID)
    case unitMismatch(habitID: UUID, habitUnit: String?, goalUnit: String)
    case categoryNotFound(UUID)
    /// The user has `GoalRules.maximumActiveGoals` active or paused goals that have not ended.
    case activeGoalLimit
    case parentNotFound(UUID)
    /// The parent's horizon is not strictly longer than the child's.
    case parentHorizonNotLonger(parent: Horizon, child: Horizon)
    /// A parent chain deeper than `GoalRules.maximumDepth`, or a goal made its own ancestor.
    case hierarchyTooDeep
    case noPartner
    /// The caller is the partner of this shared goal: they see and track it, only its creator changes it.
    case notGoalOwner(UUID)
    /// Assessments are for level and rating goals only.
    case notAssessable(GoalType)
    /// Level and rating goals take assessments, not habits or tasks.
    case notLinkable(GoalType)
    /// The goal is archived, deleted or ended, or in a state the transition does not start from.
    case invalidTransition(goal: UUID, from: String, action: String)
    case tooManyLinks
    /// The account was deleted (UserDeleted or PurgeUser): nothing of it is re-created.
    case accountDeleted(UUID)
}
