internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowPostgres
internal import Logging
internal import HabitFlowOutbox

/// Applies other services' events (each exactly once: ``EventSubscriberService`` records them in the same
/// transaction), in any order:
/// - auth's `UserCreated`/`UserUpdated` keep the user's time zone (their today, their goals' weeks), last write wins
///   by event time; `UserDeleted` removes everything of the user.
/// - habits' `CategoryDeleted` moves the user's goals in it to Uncategorized; `HabitDeleted` ends the habit's links
///   (what it gave stays).
/// - social's `PartnershipStarted` records the partnership; `PartnershipEnded` (and `UserDeleted` of either partner)
///   makes every goal shared between the two its creator's personal goal (``GoalsStore/partnershipEnded``,
///   ``GoalsStore/partnerAccountDeleted``): idempotent, and in any order with each other and with the goal's create.
///
/// An event that can never apply (a malformed payload, an unknown zone) is logged and acknowledged: throwing would
/// make the publisher retry it forever and hold back the user's later events.
struct GoalsEvents {
    static let consumer = "goals"

    let store: GoalsStore
    let clock: UserClock
    let logger: Logger

    func apply(_ envelope: Habitflow_Events_V1_EventEnvelope, _ transaction: PostgresTransaction) async throws {
        let event = EventPayloadReader(envelope, logger: logger)
        if let account = event.accountEvent() {
            if case .deleted(let userID) = account {
                try await store.partnerAccountDeleted(transaction, user: userID, clock: clock)
            }
            try await store.users.apply(account, transaction, now: clock.now)
            return
        }
        switch envelope.type {
        case Habitflow_Events_V1_CategoryDeleted.protoMessageName:
            guard let deleted = event.payload(Habitflow_Events_V1_CategoryDeleted.self),
                let userID = event.id(deleted.userID, field: "user_id"),
                let categoryID = event.id(deleted.categoryID, field: "category_id")
            else { return }
            try await store.categoryDeleted(transaction, user: userID, category: categoryID, now: clock.now)
        case Habitflow_Events_V1_HabitDeleted.protoMessageName:
            guard let deleted = event.payload(Habitflow_Events_V1_HabitDeleted.self),
                let userID = event.id(deleted.userID, field: "user_id"),
                let habitID = event.id(deleted.habitID, field: "habit_id")
            else { return }
            try await store.habitDeleted(transaction, habitUser: userID, habit: habitID, clock: clock)
        case Habitflow_Events_V1_PartnershipStarted.protoMessageName:
            guard let started = event.payload(Habitflow_Events_V1_PartnershipStarted.self),
                let id = event.id(started.partnershipID, field: "partnership_id"),
                let userID = event.id(started.userID, field: "user_id"),
                let partnerID = event.id(started.partnerUserID, field: "partner_user_id"), userID != partnerID
            else { return }
            try await store.partnershipStarted(
                transaction, id: id, users: (userID, partnerID),
                at: event.time(started.hasStartedAt ? started.startedAt : nil))
        case Habitflow_Events_V1_PartnershipEnded.protoMessageName:
            guard let ended = event.payload(Habitflow_Events_V1_PartnershipEnded.self),
                let id = event.id(ended.partnershipID, field: "partnership_id"),
                let userID = event.id(ended.userID, field: "user_id"),
                let partnerID = event.id(ended.partnerUserID, field: "partner_user_id"), userID != partnerID
            else { return }
            try await store.partnershipEnded(
                transaction, id: id, users: (userID, partnerID),
                at: event.time(ended.hasEndedAt ? ended.endedAt : nil), clock: clock)
        default:
            // Events of other types are not ours to apply.
            break
        }
    }
}
