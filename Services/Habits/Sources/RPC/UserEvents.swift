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
        let event = EventPayloadReader(envelope, logger: logger)
        switch envelope.type {
        case Habitflow_Events_V1_UserCreated.protoMessageName:
            guard let created = event.payload(Habitflow_Events_V1_UserCreated.self),
                let userID = event.id(created.userID, field: "user_id")
            else { return }
            try await store.createUserIfMissing(
                transaction, user: userID, zone: event.zone(created.timeZone),
                zoneChangedAt: event.time(created.hasCreatedAt ? created.createdAt : nil), now: clock.now)
        case Habitflow_Events_V1_UserUpdated.protoMessageName:
            guard let updated = event.payload(Habitflow_Events_V1_UserUpdated.self),
                let userID = event.id(updated.userID, field: "user_id")
            else { return }
            // An update without a zone (a username change) leaves the zone alone.
            guard !updated.timeZone.isEmpty, let zone = event.zone(updated.timeZone) else { return }
            try await store.createUserIfMissing(
                transaction, user: userID, zone: zone,
                zoneChangedAt: event.time(updated.hasUpdatedAt ? updated.updatedAt : nil), now: clock.now)
        case Habitflow_Events_V1_UserDeleted.protoMessageName:
            guard let deleted = event.payload(Habitflow_Events_V1_UserDeleted.self),
                let userID = event.id(deleted.userID, field: "user_id")
            else { return }
            try await store.purgeUser(transaction, user: userID)
        default:
            // Events of other types are not ours to apply.
            break
        }
    }
}
