internal import Foundation
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// Partners: one at a time, between friends.
extension SocialServiceHandler {
    func sendPartnerRequest(
        request: Habitflow_Social_V1_SendPartnerRequestRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_Request {
        var validator = RequestValidator()
        let requestID = validator.clientID(request.requestID, field: "request_id")
        let friendID = validator.id(request.userID, field: "user_id")
        try validator.check()
        let user = try await caller()
        if let requestID, let earlier = try await store.request(store.pool, id: requestID),
            earlier.sender.id == user.id
        {
            return earlier.proto(for: user.id)
        }
        let sent = try await store.sendPartnerRequest(
            from: user.id, to: friendID, requestID: requestID, now: clock.now)
        return sent.proto(for: user.id)
    }

    func getPartner(
        request: Habitflow_Social_V1_GetPartnerRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_Partnership {
        let user = try await caller()
        guard let partnership = try await store.currentPartnership(store.pool, of: user.id) else {
            throw SocialError.partnerNotFound
        }
        return partnership.proto
    }

    func endPartnership(
        request: Habitflow_Social_V1_EndPartnershipRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_EndPartnershipResponse {
        let user = try await caller()
        try await store.endPartnership(of: user.id, now: clock.now)
        return .init()
    }
}
