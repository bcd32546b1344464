internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

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

    // BUILD PLACEHOLDER (getPartnership, exportUser, purgeUser): replaced by the helper that owns partners.
    func getPartnership(request: Habitflow_Social_V1_GetPartnershipRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_GetPartnershipResponse
    { throw RPCError(.unimplemented, "getPartnership") }

    func exportUser(request: Habitflow_Social_V1_ExportUserRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_ExportUserResponse
    { throw RPCError(.unimplemented, "exportUser") }

    func purgeUser(request: Habitflow_Social_V1_PurgeUserRequest, context: ServerContext) async throws
        -> Habitflow_Social_V1_PurgeUserResponse
    { throw RPCError(.unimplemented, "purgeUser") }
}
