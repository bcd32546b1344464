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

    private func skip(because reason: String) {
        logger.error(
            "skipping an event that cannot apply",
            metadata: ["event": "\(envelope.id)", "type": "\(envelope.type)", "reason": "\(reason)"])
    }
}
