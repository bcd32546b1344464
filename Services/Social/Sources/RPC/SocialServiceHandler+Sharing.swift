internal import HabitFlowRPC
internal import HabitFlowSocialProtos

// BUILD PLACEHOLDER: replaced by the helper that owns this area; never merged to main as is.
extension SocialServiceHandler {
    func getSharingSettings(request: Habitflow_Social_V1_GetSharingSettingsRequest, context: ServerContext) async throws -> Habitflow_Social_V1_SharingSettings {
        throw RPCError(.unimplemented, "getSharingSettings")
    }
    func updateSharingSettings(request: Habitflow_Social_V1_UpdateSharingSettingsRequest, context: ServerContext) async throws -> Habitflow_Social_V1_SharingSettings {
        throw RPCError(.unimplemented, "updateSharingSettings")
    }
}
