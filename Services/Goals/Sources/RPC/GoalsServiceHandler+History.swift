internal import HabitFlowInternalCredential
internal import SwiftProtobuf
internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// A goal's week-by-week history and the change feed (goals shared with the caller included: see
/// `0005_partnerships.sql` for how the partner's feed follows a shared goal).
extension GoalsServiceHandler {
    func getGoalHistory(
        request: Habitflow_Goals_V1_GetGoalHistoryRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_GetGoalHistoryResponse {
        var validator = RequestValidator()
        let goalID = validator.id(request.goalID, field: "goal_id")
        let first = request.hasStartWeek ? validator.week(request.startWeek, field: "start_week") : nil
        let last = request.hasEndWeek ? validator.week(request.endWeek, field: "end_week") : nil
        if let first, let last {
            if first > last {
                validator.reject("end_week", "must not be before start_week")
            } else if first.weeks(until: last) + 1 > Self.maximumHistoryWeeks {
                validator.reject("end_week", "must be at most \(Self.maximumHistoryWeeks) weeks after start_week")
            }
        }
        try validator.check()
        let snapshot = try await reader.snapshot(
            of: try CallerIdentity.requireUser(), options: CallOptions().propagating(from: context))
        guard let goal = snapshot.goals.goals.first(where: { $0.id == goalID }) else {
            throw GoalsError.goalNotFound(goalID)
        }
        var weeks = snapshot.evaluation(of: goal).weeks
        if let first { weeks.removeAll { $0.week < first } }
        if let last { weeks.removeAll { $0.week > last } }
        if first == nil || last == nil, weeks.count > Self.maximumHistoryWeeks {
            // Without a full range, the latest weeks.
            weeks = Array(first == nil ? weeks.suffix(Self.maximumHistoryWeeks) : weeks.prefix(Self.maximumHistoryWeeks))
        }
        return .with { $0.weeks = weeks.map(\.proto) }
    }

    func listChanges(
        request: Habitflow_Goals_V1_ListChangesRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListChangesResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.changePageSizes)
        let cursor: ChangeCursor = validator.changeCursor(request.cursor)
        try validator.check()
        let user = try await caller()
        let page = try await store.changes(user: user.id, after: cursor, limit: pageSize)
        let next = page.changes.last?.cursor ?? cursor
        return .with {
            $0.changes = page.changes.map { change in
                switch change {
                case .goal(let goal, let links):
                    .with {
                        $0.goal = goal.proto(links: links)
                        $0.deleted = goal.isDeleted
                    }
                case .assessment(let assessment):
                    .with {
                        $0.assessment = assessment.proto
                        $0.deleted = assessment.deletedAt != nil
                    }
                case .task(let task):
                    .with {
                        $0.task = task.proto
                        $0.deleted = task.isDeleted
                    }
                case .review(let review):
                    .with {
                        $0.review = review.proto
                        $0.deleted = review.isDeleted
                    }
                case .sharedGoalRemoved(let goalID, let owner, _):
                    .with {
                        $0.goal = .with {
                            $0.id = goalID.lowercasedString
                            if let owner { $0.ownerID = owner.lowercasedString }
                            $0.deleted = true
                        }
                        $0.deleted = true
                    }
                }
            }
            $0.nextCursor = next.token
            $0.hasMore_p = page.hasMore
        }
    }
}
