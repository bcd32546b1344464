internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// `habitflow.social.v1.SocialService`: the public API, always on behalf of the user the gateway authenticated.
/// Its methods live by area: requests, friends and blocks (`+Friends`), partners (`+Partner`), sharing settings
/// (`+Sharing`), the leaderboard (`+Leaderboard`) and the change feed (`+Changes`).
struct SocialServiceHandler: Habitflow_Social_V1_SocialService.Handler {
    let store: SocialStore
    let people: PeopleSource
    let leaderboards: LeaderboardReader
    let clock: UserClock

    /// The calling user, known to the service from here on, with their zone.
    func caller() async throws -> (id: UUID, zone: UserTimeZone) {
        let userID = try CallerIdentity.requireUser()
        let version = try await store.userVersion(userID, now: clock.now)
        return (userID, version.zone)
    }
}
