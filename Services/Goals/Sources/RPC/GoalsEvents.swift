internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowPostgres
internal import Logging
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// Applies other services' events (each exactly once: ``EventSubscriberService`` records them in the same
/// transaction), in any order:
/// - auth's `UserCreated`/`UserUpdated` keep the user's time zone (their today, their goals' weeks), last write wins
///   by event time; `UserDeleted` removes everything of the user.
/// - habits' `CategoryDeleted` moves the user's goals in it to Uncategorized; `HabitDeleted` ends the habit's links
///   (what it gave stays).
///
/// An event that can never apply (a malformed payload, an unknown zone) is logged and acknowledged: throwing would
/// make the publisher retry it forever and hold back the user's later events.
struct GoalsEvents {
    static let consumer = "goals"

    let store: GoalsStore
    let clock: UserClock
    let logger: Logger

    func apply(_ envelope: Habitflow_Events_V1_EventEnvelope, _ transaction: PostgresTransaction) async throws {
        switch envelope.type {
        case Habitflow_Events_V1_UserCreated.protoMessageName:
            guard let event = decode(Habitflow_Events_V1_UserCreated.self, envelope),
                let userID = id(event.userID, "user_id", envelope)
            else { return }
            let changedAt = event.hasCreatedAt ? event.createdAt.date : envelope.occurredAt.date
            try await store.createUserIfMissing(
                transaction, user: userID, zone: zone(event.timeZone, envelope), zoneChangedAt: changedAt, now: clock.now)
        case Habitflow_Events_V1_UserUpdated.protoMessageName:
            guard let event = decode(Habitflow_Events_V1_UserUpdated.self, envelope),
                let userID = id(event.userID, "user_id", envelope),
                !event.timeZone.isEmpty, let zone = zone(event.timeZone, envelope)
            else { return }
            let changedAt = event.hasUpdatedAt ? event.updatedAt.date : envelope.occurredAt.date
            try await store.createUserIfMissing(
                transaction, user: userID, zone: zone, zoneChangedAt: changedAt, now: clock.now)
        case Habitflow_Events_V1_UserDeleted.protoMessageName:
            guard let event = decode(Habitflow_Events_V1_UserDeleted.self, envelope),
                let userID = id(event.userID, "user_id", envelope)
            else { return }
            try await store.purgeUser(transaction, user: userID)
        case Habitflow_Events_V1_CategoryDeleted.protoMessageName:
            guard let event = decode(Habitflow_Events_V1_CategoryDeleted.self, envelope),
                let userID = id(event.userID, "user_id", envelope),
                let categoryID = id(event.categoryID, "category_id", envelope)
            else { return }
            try await store.categoryDeleted(transaction, user: userID, category: categoryID, now: clock.now)
        case Habitflow_Events_V1_HabitDeleted.protoMessageName:
            guard let event = decode(Habitflow_Events_V1_HabitDeleted.self, envelope),
                let userID = id(event.userID, "user_id", envelope),
                let habitID = id(event.habitID, "habit_id", envelope)
            else { return }
            try await store.habitDeleted(transaction, habitUser: userID, habit: habitID, clock: clock)
        default:
            // Events of other types are not ours to apply.
            break
        }
    }

    private func decode<Event: SwiftProtobuf.Message>(
        _ type: Event.Type, _ envelope: Habitflow_Events_V1_EventEnvelope
    ) -> Event? {
        do {
            return try Event(serializedBytes: envelope.payload)
        } catch {
            skip(envelope, because: "the payload is not a \(Event.protoMessageName)")
            return nil
        }
    }

    private func id(_ text: String, _ field: String, _ envelope: Habitflow_Events_V1_EventEnvelope) -> UUID? {
        guard let id = UUID(canonical: text) else {
            skip(envelope, because: "\(field) is not a UUID")
            return nil
        }
        return id
    }

    private func zone(_ name: String, _ envelope: Habitflow_Events_V1_EventEnvelope) -> UserTimeZone? {
        guard let zone = UserTimeZone(named: name) else {
            if !name.isEmpty {
                logger.warning(
                    "ignoring an unknown time zone in an account event",
                    metadata: ["event": "\(envelope.id)", "zone": "\(name)"])
            }
            return nil
        }
        return zone
    }

    private func skip(_ envelope: Habitflow_Events_V1_EventEnvelope, because reason: String) {
        logger.error(
            "skipping an event that cannot apply",
            metadata: ["event": "\(envelope.id)", "type": "\(envelope.type)", "reason": "\(reason)"])
    }
}
