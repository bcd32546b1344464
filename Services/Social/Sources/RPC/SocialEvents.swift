internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import Logging

// BUILD PLACEHOLDER: the helper that owns friends builds the account events; CategoryDeleted is the leaderboard
// helper's (it calls a store method of the sharing settings).
struct SocialEvents {
    static let consumer = "social"

    let store: SocialStore
    let clock: UserClock
    let logger: Logger

    func apply(_ envelope: Habitflow_Events_V1_EventEnvelope, _ transaction: PostgresTransaction) async throws {}
}
