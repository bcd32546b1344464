public import Foundation
public import HabitFlowEvents
public import HabitFlowPostgres
public import SwiftProtobuf
internal import HabitFlowCrypto

/// An event a service publishes, appended to its outbox inside the transaction that makes the change.
///
/// The tables (`outbox`, `outbox_deliveries`, `processed_events`) come from ``OutboxMigrations``, applied in the
/// service's schema with its own migrations; the pool must connect as the service's role so the unqualified names
/// resolve in its schema.
public struct OutboxEvent: Sendable, Hashable {
    public var id: UUID
    /// The payload's full protobuf message name, for example `habitflow.auth.v1.UserCreated`.
    public var type: String
    public var aggregateType: String
    public var aggregateID: String
    public var payload: Data

    public init(id: UUID = UUID(), type: String, aggregateType: String, aggregateID: String, payload: Data) {
        self.id = id
        self.type = type
        self.aggregateType = aggregateType
        self.aggregateID = aggregateID
        self.payload = payload
    }

    /// An event whose type is the message's full name and whose payload is the serialized message.
    public init(
        id: UUID = UUID(), aggregateType: String, aggregateID: String, message: some SwiftProtobuf.Message
    ) throws {
        self.init(
            id: id, type: Swift.type(of: message).protoMessageName, aggregateType: aggregateType, aggregateID: aggregateID,
            payload: try message.serializedBytes())
    }
}

extension PostgresTransaction {
    /// Appends `event` to the outbox. It is published if and only if this transaction commits; the commit also
    /// wakes the relay (the outbox's insert trigger sends `NOTIFY`).
    public func appendToOutbox(_ event: OutboxEvent) async throws {
        try await execute(
            """
            INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) \
            VALUES (\(event.id), \(event.aggregateType), \(event.aggregateID), \(event.type), \(event.payload))
            """)
    }
}

/// A service that receives a publisher's events: over RPC in production (``RPCEventSubscriber``), in-process in
/// tests. The relay delivers to each subscriber on its own, under the subscriber's name in the routes.
///
/// `deliver` returns once the subscriber has durably processed the event; a throw means "try again later":
/// ``OutboxSubscriberUnreachable`` for the subscriber as a whole, any other error for this event (its aggregate
/// waits, the subscriber's other aggregates go on). Delivery is at least once: a subscriber must ignore an event id
/// it has already processed (see ``PostgresTransaction/markEventProcessed(_:consumer:)``).
public protocol OutboxSubscriber: Sendable {
    func deliver(_ envelope: Habitflow_Events_V1_EventEnvelope) async throws
}

/// The subscriber could not be reached at all (down, refusing connections, not answering in time): the relay ends
/// that subscriber's pass and backs it off as a whole, rather than trying every other aggregate's event in turn.
public struct OutboxSubscriberUnreachable: Error, CustomStringConvertible {
    public var underlying: any Error

    public init(_ underlying: any Error) {
        self.underlying = underlying
    }

    public var description: String { "subscriber unreachable: \(underlying)" }
}

extension PostgresTransaction {
    /// Records that `consumer` processed event `eventID`. Returns `false` if it already had, in which case the
    /// caller should skip the event's effects. Call it first in the transaction that applies the event, so the
    /// record and the effects commit together.
    public func markEventProcessed(_ eventID: UUID, consumer: String) async throws -> Bool {
        try await execute(
            "INSERT INTO processed_events (consumer, event_id) VALUES (\(consumer), \(eventID)) ON CONFLICT DO NOTHING"
        ) == 1
    }
}

extension PostgresPool {
    /// Applies an event exactly once per consumer: runs `body` in a transaction that also records the event id,
    /// or does nothing (returns `nil`) when this consumer already processed it.
    @discardableResult
    public func processEventOnce<Result>(
        _ envelope: Habitflow_Events_V1_EventEnvelope, consumer: String,
        _ body: (PostgresTransaction) async throws -> Result
    ) async throws -> Result? {
        guard let eventID = UUID(canonical: envelope.id) else {
            throw PostgresError(kind: .invalidParameter, message: "event id \"\(envelope.id)\" is not a UUID")
        }
        return try await transaction { transaction in
            guard try await transaction.markEventProcessed(eventID, consumer: consumer) else { return nil }
            return try await body(transaction)
        }
    }
}
