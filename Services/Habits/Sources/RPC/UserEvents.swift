internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import Logging

/// Applies auth's account events (each exactly once: ``EventSubscriberService`` records them in the same
/// transaction): `UserCreated` creates the user with the default categories and their time zone, `UserUpdated`
/// changes the zone (past entries keep their dates), `UserDeleted` removes everything of the user.
///
/// An event that can never apply (a malformed payload, an unknown zone) is logged and acknowledged: throwing would
/// make the publisher retry it forever and hold back the user's later events.
struct UserEvents {
    static let consumer = "habits"

    let store: HabitsStore
    let clock: UserClock
    let logger: Logger

    func apply(_ envelope: Habitflow_Events_V1_EventEnvelope, _ transaction: PostgresTransaction) async throws {
        // Events of other types are not ours to apply.
        guard let account = EventPayloadReader(envelope, logger: logger).accountEvent() else { return }
        try await store.users.apply(account, transaction, now: clock.now)
    }
}
