internal import HabitFlowRPC
internal import HabitFlowSocialProtos

// BUILD PLACEHOLDER: replaced by the helper that owns this area; never merged to main as is.
extension SocialServiceHandler {
    func sendPartnerRequest(request: Habitflow_Social_V1_SendPartnerRequestRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Request {
        throw RPCError(.unimplemented, "sendPartnerRequest")
    }
    func getPartner(request: Habitflow_Social_V1_GetPartnerRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Partnership {
        throw RPCError(.unimplemented, "getPartner")
    }
    func endPartnership(request: Habitflow_Social_V1_EndPartnershipRequest, context: ServerContext) async throws -> Habitflow_Social_V1_EndPartnershipResponse {
        throw RPCError(.unimplemented, "endPartnership")
    }
}
