public import HabitFlowRPC
public import Logging

/// Adds `authorization: Bearer <token>` to every call, asking `token` each time (so it can rotate).
public struct BearerTokenInterceptor: ClientInterceptor {
    private let token: @Sendable () async throws -> String

    public init(token: @escaping @Sendable () async throws -> String) {
        self.token = token
    }

    public func willStart(_ call: inout ClientCallDetails) async throws {
        call.options.metadata.set("authorization", "Bearer \(try await token())")
    }
}

/// Gives every call a W3C `traceparent`: the one already in its metadata (see ``CallOptions/propagating(from:)``),
/// or a new trace.
public struct TraceContextInterceptor: ClientInterceptor {
    public init() {}

    public func willStart(_ call: inout ClientCallDetails) async throws {
        if call.options.metadata[TraceContext.headerName] == nil {
            call.options.metadata.setTraceContext(TraceContext.newRoot())
        }
    }
}

/// Logs every finished call: method, status and duration (debug for OK, info otherwise). Metadata values are not
/// logged (they may hold credentials).
public struct LoggingClientInterceptor: ClientInterceptor {
    private let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    public func didFinish(_ call: ClientCallDetails, status: RPCStatus, duration: Duration) {
        let metadata: Logger.Metadata = [
            "rpc.method": "\(call.method.path)", "rpc.status": "\(status.code)",
            "rpc.duration_ms": "\(Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15)",
        ]
        if status.code == .ok {
            logger.debug("call finished", metadata: metadata)
        } else {
            logger.info("call failed", metadata: metadata.merging(["rpc.message": "\(status.message)"]) { $1 })
        }
    }
}

/// Reports every finished call to `record` (method, status code, duration), for example into Prometheus
/// counters and histograms.
public struct MetricsClientInterceptor: ClientInterceptor {
    private let record: @Sendable (MethodDescriptor, RPCStatusCode, Duration) -> Void

    public init(record: @escaping @Sendable (_ method: MethodDescriptor, _ code: RPCStatusCode, _ duration: Duration) -> Void) {
        self.record = record
    }

    public func didFinish(_ call: ClientCallDetails, status: RPCStatus, duration: Duration) {
        record(call.method, status.code, duration)
    }
}
