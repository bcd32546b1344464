internal import HabitFlowRPC
internal import HabitFlowSocialProtos

// BUILD PLACEHOLDER: replaced by the helper that owns this area; never merged to main as is.
extension SocialServiceHandler {
    func listChanges(request: Habitflow_Social_V1_ListChangesRequest, context: ServerContext) async throws -> Habitflow_Social_V1_ListChangesResponse {
        throw RPCError(.unimplemented, "listChanges")
    }
}
