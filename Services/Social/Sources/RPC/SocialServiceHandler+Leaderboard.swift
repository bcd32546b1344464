internal import HabitFlowInternalCredential
internal import Foundation
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// The weekly leaderboard: the caller and their friends who share, scored on the caller's current ISO week.
extension SocialServiceHandler {
    /// 50 lines by default, at most the whole board (the caller and 100 friends).
    static let leaderboardPageSizes = PageSizeRule(defaultSize: 50, maximum: SocialRules.maximumLeaderboardLines)
    static let leaderboardList = "leaderboard"

    func getLeaderboard(request: Habitflow_Social_V1_GetLeaderboardRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_Leaderboard
    {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.leaderboardPageSizes)
        // The token is an offset into the ranked board, which is computed whole on every call.
        var offset = 0
        if let fields = validator.pageToken(request.pageToken, list: Self.leaderboardList, fieldCount: 1) {
            if let value = Int(fields[0]), value >= 0 {
                offset = value
            } else {
                validator.reject("page_token", "is not a token this list returned")
            }
        }
        try validator.check()
        let board = try await leaderboards.board(
            of: try CallerIdentity.requireUser(), options: CallOptions().propagating(from: context))
        let page = board.lines.dropFirst(offset).prefix(pageSize)
        return .with {
            $0.week = board.week.leaderboardProto
            $0.entries = page.map(\.proto)
            if offset + page.count < board.lines.count {
                $0.nextPageToken = PageToken.encode(list: Self.leaderboardList, [String(offset + page.count)])
            }
            $0.total = Int32(board.lines.count)
            $0.myRank = Int32(board.mine?.rank ?? 0)
            if let mine = board.mine { $0.me = mine.proto }
        }
    }
}
