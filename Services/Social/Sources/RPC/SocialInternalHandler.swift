internal import HabitFlowCalendar
internal import HabitFlowCrypto
internal import Foundation
internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos
internal import SwiftProtobuf

/// `habitflow.social.v1.SocialInternal`: for other services (goals asks for partners; the gateway's dashboard and
/// export; account deletion). The leaderboard top is in `+Leaderboard`.
struct SocialInternalHandler: Habitflow_Social_V1_SocialInternal.Handler {
    let store: SocialStore
    let leaderboards: LeaderboardReader
    let clock: UserClock

    /// The user a call names, after checking that a service made it.
    func user(_ text: String) throws -> UUID {
        try CallerIdentity.requireServiceCaller(of: "SocialInternal")
        var validator = RequestValidator()
        let userID = validator.id(text, field: "user_id")
        try validator.check()
        return userID
    }

    func getPartnership(request: Habitflow_Social_V1_GetPartnershipRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_GetPartnershipResponse
    {
        let userID = try user(request.userID)
        guard let partnership = try await store.currentPartnership(store.pool, of: userID) else { return .init() }
        return .with {
            $0.found = true
            $0.partnershipID = partnership.id.lowercasedString
            $0.partnerUserID = partnership.partner.id.lowercasedString
            $0.startTime = Google_Protobuf_Timestamp(date: partnership.startedAt)
        }
    }

    func exportUser(request: Habitflow_Social_V1_ExportUserRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_ExportUserResponse
    {
        let userID = try user(request.userID)
        let everything = try await store.export(user: userID)
        return .with {
            $0.friends = everything.friends.map(\.proto)
            $0.requests = everything.requests.map { $0.proto(for: userID) }
            $0.blocked = everything.blocks.map(\.proto)
            if let partnership = everything.partnership { $0.partnership = partnership.proto }
            $0.settings = everything.settings.proto
        }
    }

    /// Removes everything of the user, as UserDeleted does (``SocialStore/purgeUser(_:_:now:)``).
    func purgeUser(request: Habitflow_Social_V1_PurgeUserRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_PurgeUserResponse
    {
        let userID = try user(request.userID)
        let existed = try await store.purgeUser(userID, now: clock.now)
        return .with { $0.existed = existed }
    }
}
