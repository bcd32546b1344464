internal import HabitFlowCrypto
public import HabitFlowRPC

/// The statuses the goals service answers with, worded once.
extension GoalsError: RPCErrorConvertible {
    public var rpcError: RPCError {
        switch self {
        case .goalNotFound(let goalID):
            .notFound(resourceType: "goal", name: goalID.lowercasedString)
        case .assessmentNotFound(let assessmentID):
            .notFound(resourceType: "assessment", name: assessmentID.lowercasedString)
        case .taskNotFound(let taskID):
            .notFound(resourceType: "task", name: taskID.lowercasedString)
        case .reviewNotFound(let reviewID):
            .notFound(resourceType: "review", name: reviewID.lowercasedString)
        case .habitNotFound(let habitID):
            .notFound(resourceType: "habit", name: habitID.lowercasedString)
        case .categoryNotFound(let categoryID):
            .notFound(resourceType: "category", name: categoryID.lowercasedString)
        case .parentNotFound(let goalID):
            .notFound(resourceType: "goal", name: goalID.lowercasedString)
        case .habitDeleted(let habitID):
            .failedPrecondition(
                type: "HABIT_DELETED", subject: "habits/\(habitID.lowercasedString)", "the habit was deleted")
        case .unitMismatch(let habitID, let habitUnit, let goalUnit):
            .failedPrecondition(
                type: "UNIT_MISMATCH", subject: "habits/\(habitID.lowercasedString)",
                "a quantity goal in \"\(goalUnit)\" links only habits in \"\(goalUnit)\"; this habit's unit is "
                    + (habitUnit.map { "\"\($0)\"" } ?? "not set"))
        case .activeGoalLimit:
            .failedPrecondition(
                type: "ACTIVE_GOAL_LIMIT", subject: "goals",
                "at most \(GoalRules.maximumActiveGoals) active or paused goals; complete, archive or delete one to free a slot")
        case .parentHorizonNotLonger(let parent, let child):
            .failedPrecondition(
                type: "PARENT_HORIZON", subject: "goals",
                "a parent goal needs a longer horizon than its child (parent \(parent.rawValue), child \(child.rawValue))")
        case .hierarchyTooDeep:
            .failedPrecondition(
                type: "HIERARCHY_DEPTH", subject: "goals",
                "goals nest at most \(GoalRules.maximumDepth) deep, and never under themselves")
        case .noPartner:
            .failedPrecondition(
                type: "NO_PARTNER", subject: "partner", "a shared goal needs a partner, and you have no partner")
        case .notGoalOwner(let goalID):
            .permissionDenied(
                reason: "NOT_GOAL_OWNER",
                "goals/\(goalID.lowercasedString) is shared with you: only its creator edits, pauses, completes, archives "
                    + "or deletes it")
        case .notAssessable(let type):
            .failedPrecondition(
                type: "NOT_ASSESSABLE", subject: "goals",
                "only level and rating goals take assessments; this is a \(type.rawValue) goal")
        case .notLinkable(let type):
            .failedPrecondition(
                type: "NOT_LINKABLE", subject: "goals",
                "a \(type.rawValue) goal counts assessments, not habits or tasks")
        case .invalidTransition(let goalID, let from, let action):
            .failedPrecondition(
                type: "GOAL_STATE", subject: "goals/\(goalID.lowercasedString)",
                "cannot \(action) a goal that is \(from)")
        case .tooManyLinks:
            .failedPrecondition(
                type: "LINK_LIMIT", subject: "goals",
                "a goal links at most \(GoalRules.maximumOpenLinks) habits at once; unlink one first")
        case .accountDeleted(let userID):
            .failedPrecondition(
                type: "ACCOUNT_DELETED", subject: "users/\(userID.lowercasedString)", "the account was deleted")
        }
    }
}
