internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// The dashboard's part of the leaderboard (the gateway's Dashboard): the top lines and the user's own.
extension SocialInternalHandler {
    /// How many lines the dashboard may ask for.
    static let leaderboardTops = 1...20

    func getLeaderboardTop(request: Habitflow_Social_V1_GetLeaderboardTopRequest, context: ServerContext)
        async throws -> Habitflow_Social_V1_GetLeaderboardTopResponse
    {
        try CallerIdentity.requireServiceCaller(of: "SocialInternal")
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        let top = request.top == 0 ? SocialRules.dashboardTop : Int(request.top)
        if !Self.leaderboardTops.contains(top) {
            validator.reject(
                "top",
                "must be from \(Self.leaderboardTops.lowerBound) to \(Self.leaderboardTops.upperBound) "
                    + "(0: \(SocialRules.dashboardTop)), got \(request.top)")
        }
        try validator.check()
        let board = try await leaderboards.board(of: userID, options: CallOptions().propagating(from: context))
        return .with {
            $0.week = board.week.leaderboardProto
            $0.entries = board.lines.prefix(top).map(\.proto)
            if let mine = board.mine { $0.me = mine.proto }
            $0.total = Int32(board.lines.count)
        }
    }
}
