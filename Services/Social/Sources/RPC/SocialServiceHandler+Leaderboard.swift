internal import HabitFlowRPC
internal import HabitFlowSocialProtos

// BUILD PLACEHOLDER: replaced by the helper that owns this area; never merged to main as is.
extension SocialServiceHandler {
    func getLeaderboard(request: Habitflow_Social_V1_GetLeaderboardRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Leaderboard {
        throw RPCError(.unimplemented, "getLeaderboard")
    }
}
