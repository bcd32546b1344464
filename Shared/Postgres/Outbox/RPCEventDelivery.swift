public import HabitFlowEvents
public import HabitFlowPostgres
public import HabitFlowRPC
internal import Foundation
internal import HabitFlowCrypto

/// Delivers outbox events to the subscribing services over RPC (`habitflow.events.v1.EventSubscriber/Deliver`).
///
/// Every subscriber of an event type gets the event; a failure anywhere throws, so the relay retries the whole
/// delivery later. Subscribers that already applied it acknowledge the repeat without applying it twice.
public struct RPCEventSink: OutboxEventSink {
    /// Subscribers by event type (the payload's full proto name); `"*"` subscribes to every type.
    private let routes: [String: [Habitflow_Events_V1_EventSubscriber.Client]]
    private let timeout: Duration

    public init(routes: [String: [Habitflow_Events_V1_EventSubscriber.Client]], timeout: Duration = .seconds(10)) {
        self.routes = routes
        self.timeout = timeout
    }

    public func deliver(_ envelope: Habitflow_Events_V1_EventEnvelope) async throws {
        let subscribers = (routes[envelope.type] ?? []) + (routes["*"] ?? [])
        var request = Habitflow_Events_V1_DeliverEventRequest()
        request.event = envelope
        for subscriber in subscribers {
            var options = CallOptions()
            options.timeout = timeout
            options.idempotent = true
            _ = try await subscriber.deliver(request, options: options)
        }
    }
}

/// The receiving end: applies each delivered event at most once per consumer, in one transaction with the record
/// of having applied it (`processed_events`), so redeliveries are harmless.
public struct EventSubscriberService: Habitflow_Events_V1_EventSubscriber.Handler {
    public typealias Apply = @Sendable (Habitflow_Events_V1_EventEnvelope, PostgresTransaction) async throws -> Void

    private let pool: PostgresPool
    private let consumer: String
    private let apply: Apply

    /// - Parameters:
    ///   - consumer: the name under which processed event ids are recorded, for example `"habits"`.
    ///   - apply: the event's effects; events of types the service does not handle should simply be ignored.
    public init(pool: PostgresPool, consumer: String, apply: @escaping Apply) {
        self.pool = pool
        self.consumer = consumer
        self.apply = apply
    }

    public func deliver(
        request: Habitflow_Events_V1_DeliverEventRequest, context: ServerContext
    ) async throws -> Habitflow_Events_V1_DeliverEventResponse {
        guard request.hasEvent, UUID(canonical: request.event.id) != nil else {
            throw RPCError(.invalidArgument, "event.id must be a UUID")
        }
        let applied = try await pool.processEventOnce(request.event, consumer: consumer) { transaction in
            try await apply(request.event, transaction)
            return true
        }
        var response = Habitflow_Events_V1_DeliverEventResponse()
        response.applied = applied ?? false
        return response
    }
}
