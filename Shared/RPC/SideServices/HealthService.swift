public import HabitFlowGRPCSideServiceProtos
internal import HabitFlowLocking
public import HabitFlowRPC

/// The serving status of a server and of each of its services, as reported by ``HealthService``.
///
/// `""` stands for the whole server. Changes reach every `Watch` stream at once.
public final class HealthStatusRegistry: Sendable {
    public typealias Status = Grpc_Health_V1_HealthCheckResponse.ServingStatus

    private struct State {
        var statuses: [String: Status] = [:]
        var watchers: [Int: (service: String, continuation: AsyncStream<Status>.Continuation)] = [:]
        var nextWatcherID = 0
    }

    private let state = Locked(State())

    public init() {}

    /// Sets (or changes) the status of `service` ("" for the whole server).
    public func setStatus(_ status: Status, for service: String = "") {
        let watchers = state.withLock { state in
            state.statuses[service] = status
            return state.watchers.values.filter { $0.service == service }.map(\.continuation)
        }
        for watcher in watchers { watcher.yield(status) }
    }

    /// Marks every known service, and the server, NOT_SERVING (at shutdown).
    public func markAllNotServing() {
        let services = state.withLock { Array($0.statuses.keys) }
        for service in services { setStatus(.notServing, for: service) }
    }

    public func status(of service: String) -> Status? {
        state.withLock { $0.statuses[service] }
    }

    /// The current status at once (SERVICE_UNKNOWN for a service not registered yet), then every change.
    func watch(_ service: String) -> AsyncStream<Status> {
        let (stream, continuation) = AsyncStream.makeStream(of: Status.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            let id = state.nextWatcherID
            state.nextWatcherID += 1
            state.watchers[id] = (service, continuation)
            continuation.yield(state.statuses[service] ?? .serviceUnknown)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
        }
        return stream
    }
}

/// `grpc.health.v1.Health`: Check answers the current status (NOT_FOUND for unknown services); Watch streams it.
public struct HealthService: Grpc_Health_V1_Health.Handler {
    public let registry: HealthStatusRegistry

    public init(registry: HealthStatusRegistry) {
        self.registry = registry
    }

    public func check(
        request: Grpc_Health_V1_HealthCheckRequest, context: ServerContext
    ) async throws -> Grpc_Health_V1_HealthCheckResponse {
        guard let status = registry.status(of: request.service) else {
            throw RPCError(.notFound, "unknown service \"\(request.service)\"")
        }
        return .with { $0.status = status }
    }

    public func watch(
        request: Grpc_Health_V1_HealthCheckRequest, responses: ResponseWriter<Grpc_Health_V1_HealthCheckResponse>,
        context: ServerContext
    ) async throws {
        // Ends when the client cancels (the stream finishes with the task).
        for await status in registry.watch(request.service) {
            try await responses.write(.with { $0.status = status })
        }
    }
}
