internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// The change feed for offline clients: friends, requests, blocks, the partnership and the settings.
extension SocialServiceHandler {
    static let changePageSizes = PageSizeRule(defaultSize: 500, maximum: 1000)

    func listChanges(
        request: Habitflow_Social_V1_ListChangesRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_ListChangesResponse {
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
                case .friend(let friend):
                    .with {
                        $0.friend = friend.proto
                        $0.deleted = friend.deletedAt != nil
                    }
                case .request(let request, _):
                    .with { $0.request = request.proto(for: user.id) }
                case .block(let block):
                    .with {
                        $0.blocked = block.proto
                        $0.deleted = block.deletedAt != nil
                    }
                case .partnership(let partnership):
                    .with {
                        $0.partnership = partnership.proto
                        $0.deleted = partnership.endedAt != nil
                    }
                case .settings(let settings):
                    .with { $0.settings = settings.proto }
                }
            }
            $0.nextCursor = next.token
            $0.hasMore_p = page.hasMore
        }
    }
}
