internal import HabitFlowRPC
internal import HabitFlowSocialProtos

// BUILD PLACEHOLDER: replaced by the helper that owns the leaderboard.
extension SocialInternalHandler {
    func getLeaderboardTop(request: Habitflow_Social_V1_GetLeaderboardTopRequest, context: ServerContext)
        async throws -> Habitflow_Social_V1_GetLeaderboardTopResponse
    { throw RPCError(.unimplemented, "getLeaderboardTop") }
}
