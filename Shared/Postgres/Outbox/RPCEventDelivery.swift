public import HabitFlowEvents
public import HabitFlowPostgres
public import HabitFlowRPC
internal import Foundation
internal import HabitFlowCrypto

/// One subscribing service, reached over RPC (`habitflow.events.v1.EventSubscriber/Deliver`).
///
/// A subscriber that already applied an event acknowledges the repeat without applying it twice. `UNAVAILABLE`
/// (which is also how a refused or lost connection ends) and `DEADLINE_EXCEEDED` are thrown as
/// ``OutboxSubscriberUnreachable``: the relay backs the whole subscriber off instead of trying its other events.
public struct RPCEventSubscriber: OutboxSubscriber {
    private let client: Habitflow_Events_V1_EventSubscriber.Client
    private let timeout: Duration

    public init(client: Habitflow_Events_V1_EventSubscriber.Client, timeout: Duration = .seconds(10)) {
        self.client = client
        self.timeout = timeout
    }

    public func deliver(_ envelope: Habitflow_Events_V1_EventEnvelope) async throws {
        var request = Habitflow_Events_V1_DeliverEventRequest()
        request.event = envelope
        var options = CallOptions()
        options.timeout = timeout
        options.idempotent = true
        do {
            _ = try await client.deliver(request, options: options)
        } catch let error as RPCError where [.unavailable, .deadlineExceeded].contains(error.code) {
            throw OutboxSubscriberUnreachable(error)
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
