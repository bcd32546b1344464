internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import Logging

/// Applies other services' events (each exactly once: ``EventSubscriberService`` records them in the same
/// transaction), in any order:
/// - auth's `UserCreated`/`UserUpdated` keep the user's time zone and the names friends see (username, display
///   name; without a display name the username stands in), each last write wins by event time;
///   `UserDeleted` removes everything of the user, ending their partnership first
///   (``SocialStore/purgeUser(_:_:now:)``).
/// - habits' `CategoryDeleted` drops the category from the user's shared categories.
///
/// An event that can never apply (a malformed payload) is logged and acknowledged: throwing would make the publisher
/// retry it forever and hold back the user's later events.
struct SocialEvents {
    static let consumer = "social"

    let store: SocialStore
    let clock: UserClock
    let logger: Logger

    func apply(_ envelope: Habitflow_Events_V1_EventEnvelope, _ transaction: PostgresTransaction) async throws {
        let event = EventPayloadReader(envelope, logger: logger)
        let now = clock.now
        switch envelope.type {
        case Habitflow_Events_V1_UserCreated.protoMessageName:
            guard let created = event.payload(Habitflow_Events_V1_UserCreated.self),
                let userID = event.id(created.userID, field: "user_id")
            else { return }
            try await applyAccount(
                event, transaction, user: userID, username: created.username,
                displayName: created.displayName.isEmpty ? created.username : created.displayName,
                changedAt: event.time(created.hasCreatedAt ? created.createdAt : nil), now: now)
        case Habitflow_Events_V1_UserUpdated.protoMessageName:
            guard let updated = event.payload(Habitflow_Events_V1_UserUpdated.self),
                let userID = event.id(updated.userID, field: "user_id")
            else { return }
            try await applyAccount(
                event, transaction, user: userID, username: updated.username,
                displayName: updated.displayName.isEmpty ? updated.username : updated.displayName,
                changedAt: event.time(updated.hasUpdatedAt ? updated.updatedAt : nil), now: now)
        case Habitflow_Events_V1_UserDeleted.protoMessageName:
            guard let deleted = event.payload(Habitflow_Events_V1_UserDeleted.self),
                let userID = event.id(deleted.userID, field: "user_id")
            else { return }
            try await store.purgeUser(transaction, userID, now: now)
        case Habitflow_Events_V1_CategoryDeleted.protoMessageName:
            guard let deleted = event.payload(Habitflow_Events_V1_CategoryDeleted.self),
                let userID = event.id(deleted.userID, field: "user_id"),
                let categoryID = event.id(deleted.categoryID, field: "category_id")
            else { return }
            try await store.categoryDeleted(transaction, user: userID, category: categoryID, now: now)
        default:
            // Events of other types are not ours to apply.
            break
        }
    }

    /// The zone as every service applies it (an update without one keeps the zone, but still names the user), then
    /// the names.
    private func applyAccount(
        _ event: EventPayloadReader, _ transaction: PostgresTransaction, user userID: UUID, username: String,
        displayName: String, changedAt: Date, now: Date
    ) async throws {
        if let account = event.accountEvent() {
            try await store.users.apply(account, transaction, now: now)
        } else {
            try await store.users.createIfMissing(transaction, user: userID, zone: nil, zoneChangedAt: nil, now: now)
        }
        guard !username.isEmpty else { return }
        try await store.applyNames(
            transaction, user: userID, username: username, displayName: displayName, changedAt: changedAt)
    }
}
