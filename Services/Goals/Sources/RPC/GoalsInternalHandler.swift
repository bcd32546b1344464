internal import HabitFlowInternalCredential
internal import HabitFlowServiceAPI
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// `habitflow.goals.v1.GoalsInternal`: for other services (the gateway's dashboard and export, account deletion).
struct GoalsInternalHandler: Habitflow_Goals_V1_GoalsInternal.Handler {
    let store: GoalsStore
    let reader: GoalProgressReader

    private func user(_ text: String) throws -> UUID {
        try CallerIdentity.requireServiceCaller(of: "GoalsInternal")
        var validator = RequestValidator()
        let userID = validator.id(text, field: "user_id")
        try validator.check()
        return userID
    }

    func listActiveGoals(
        request: Habitflow_Goals_V1_ListActiveGoalsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListActiveGoalsResponse {
        let userID = try user(request.userID)
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        return .with {
            $0.goals = snapshot.orderedGoals
                .filter { snapshot.progress[$0.id]?.status.holdsASlot ?? false }
                .map(snapshot.proto(of:))
        }
    }

    func exportUser(
        request: Habitflow_Goals_V1_ExportUserRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ExportUserResponse {
        let userID = try user(request.userID)
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        let everything = try await store.export(user: userID)
        return .with {
            $0.goals = everything.goals.map { goal in
                goal.isDeleted
                    ? goal.proto(links: everything.links[goal.id] ?? [], habits: snapshot.habits)
                    : snapshot.proto(of: goal)
            }
            $0.assessments = everything.assessments.map(\.proto)
            $0.tasks = everything.tasks.map(\.proto)
            $0.reviews = everything.reviews.map(\.proto)
        }
    }

    func purgeUser(
        request: Habitflow_Goals_V1_PurgeUserRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_PurgeUserResponse {
        let userID = try user(request.userID)
        let existed = try await store.purgeUser(userID)
        return .with { $0.existed = existed }
    }
}
