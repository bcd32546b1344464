internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowServiceAPI

/// Which of the user's goals a list shows (`ListGoals`, `GetGoalsOverview`) and which page, validated.
struct GoalListFilter: Sendable {
    var statuses: Set<GoalStatus>
    var horizon: Horizon?
    var categoryID: UUID?
    var parentID: UUID?
    var pageSize: Int
    /// Goals of the filtered order before the page.
    var offset = 0
    /// Names the filter in page tokens, so that a token cannot continue another list.
    var listName: String

    /// The filter of a request's fields; what is wrong goes to `validator`.
    init(
        statuses protos: [Habitflow_Goals_V1_GoalStatus], horizon: Habitflow_Goals_V1_Horizon, categoryID: String,
        parentGoalID: String, pageSize: Int32, pageToken: String, validator: inout RequestValidator
    ) {
        statuses = []
        for (index, proto) in protos.enumerated() {
            if let status = GoalStatus(proto), proto != .unspecified {
                statuses.insert(status)
            } else {
                validator.reject("statuses[\(index)]", "must be a goal status, not \(proto)")
            }
        }
        if statuses.isEmpty { statuses = Set(GoalStatus.allCases).subtracting([.archived]) }
        self.horizon = horizon == .unspecified ? nil : validator.horizon(horizon, field: "horizon")
        self.categoryID = validator.optionalID(categoryID, field: "category_id")
        parentID = validator.optionalID(parentGoalID, field: "parent_goal_id")
        self.pageSize = validator.pageSize(pageSize, rule: GoalsServiceHandler.goalPageSizes)
        // The token is an offset into the filtered order.
        listName = "goals:" + [
            statuses.map { "\($0.proto.rawValue)" }.sorted().joined(separator: ","),
            self.horizon?.rawValue ?? "", self.categoryID?.lowercasedString ?? "", parentID?.lowercasedString ?? "",
        ].joined(separator: ";")
        if let token = validator.pageToken(pageToken, list: listName, fieldCount: 1) {
            if let value = Int(token[0]), value >= 0 {
                offset = value
            } else {
                validator.reject("page_token", "is not a token this list returned")
            }
        }
    }

    /// Whether the list shows `goal`, whose derived status is `status` (`nil`: none derived, never shown).
    func matches(_ goal: GoalRecord, status: GoalStatus?) -> Bool {
        (status.map { statuses.contains($0) } ?? false)
            && (horizon == nil || goal.horizon == horizon)
            && (categoryID == nil || goal.categoryID == categoryID)
            && (parentID == nil || goal.parentGoalID == parentID)
    }
}
