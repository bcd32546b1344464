public import Foundation
public import HabitFlowCalendar
public import HabitFlowEvents
internal import HabitFlowCrypto
public import Logging
public import SwiftProtobuf

/// Reads the fields of a delivered event for a consumer's `apply`. A field that can never apply (a payload that does
/// not decode, an id that is not a UUID) is logged and answers `nil`: the consumer then acknowledges the event
/// without effect, because throwing would make the publisher retry it forever and hold back the later events.
public struct EventPayloadReader {
    public let envelope: Habitflow_Events_V1_EventEnvelope
    public let logger: Logger

    public init(_ envelope: Habitflow_Events_V1_EventEnvelope, logger: Logger) {
        self.envelope = envelope
        self.logger = logger
    }

    /// The payload as `Event`.
    public func payload<Event: SwiftProtobuf.Message>(_ type: Event.Type) -> Event? {
        do {
            return try Event(serializedBytes: envelope.payload)
        } catch {
            skip(because: "the payload is not a \(Event.protoMessageName)")
            return nil
        }
    }

    /// A UUID field of the payload (`field` names it in the log).
    public func id(_ text: String, field: String) -> UUID? {
        guard let id = UUID(canonical: text) else {
            skip(because: "\(field) is not a UUID")
            return nil
        }
        return id
    }

    /// A time zone field; an unknown name is logged (the rest of the event still applies).
    public func zone(_ name: String) -> UserTimeZone? {
        guard let zone = UserTimeZone(named: name) else {
            if !name.isEmpty {
                logger.warning(
                    "ignoring an unknown time zone in an event", metadata: ["event": "\(envelope.id)", "zone": "\(name)"])
            }
            return nil
        }
        return zone
    }

    /// When the change happened: the payload's own time if it has one, else the envelope's.
    public func time(_ payloadTime: Google_Protobuf_Timestamp?) -> Date {
        (payloadTime ?? envelope.occurredAt).date
    }

    /// Auth's account events as every service that keeps users' data applies them; `nil` for other types, and for an
    /// update that changes nothing a service keeps (no zone, as on a username change) or cannot apply.
    public func accountEvent() -> AccountEvent? {
        switch envelope.type {
        case Habitflow_Events_V1_UserCreated.protoMessageName:
            guard let created = payload(Habitflow_Events_V1_UserCreated.self),
                let userID = id(created.userID, field: "user_id")
            else { return nil }
            return .user(userID, zone: zone(created.timeZone), changedAt: time(created.hasCreatedAt ? created.createdAt : nil))
        case Habitflow_Events_V1_UserUpdated.protoMessageName:
            guard let updated = payload(Habitflow_Events_V1_UserUpdated.self),
                let userID = id(updated.userID, field: "user_id"), !updated.timeZone.isEmpty,
                let zone = zone(updated.timeZone)
            else { return nil }
            return .user(userID, zone: zone, changedAt: time(updated.hasUpdatedAt ? updated.updatedAt : nil))
        case Habitflow_Events_V1_UserDeleted.protoMessageName:
            guard let deleted = payload(Habitflow_Events_V1_UserDeleted.self),
                let userID = id(deleted.userID, field: "user_id")
            else { return nil }
            return .deleted(userID)
        default:
            return nil
        }
    }

    private func skip(because reason: String) {
        logger.error(
            "skipping an event that cannot apply",
            metadata: ["event": "\(envelope.id)", "type": "\(envelope.type)", "reason": "\(reason)"])
    }
}

/// What auth's account events ask of a service that keeps users' data.
public enum AccountEvent: Sendable, Hashable {
    /// UserCreated, or UserUpdated with a zone: the user exists from now on (created unless known), with `zone` if it
    /// is newer than the one applied (last write wins by `changedAt`); `nil` keeps the zone (UTC for a new user).
    case user(UUID, zone: UserTimeZone?, changedAt: Date)
    /// UserDeleted: everything of the user goes, and nothing of them is re-created.
    case deleted(UUID)
}
