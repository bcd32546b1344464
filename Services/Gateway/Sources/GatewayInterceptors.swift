internal import Foundation
internal import HabitFlowPublicAPI
internal import HabitFlowRPC
internal import Logging
internal import Prometheus
internal import Synchronization
internal import HabitFlowCrypto

/// What the gateway knows about the client call it is serving, bound around the whole call.
struct GatewayCallInfo: Sendable {
    /// The client's `x-request-id`, or one the gateway made up; returned to the client and passed to services.
    var requestID: String
    /// The client's IP address, as the connection shows it.
    var clientAddress: String
    /// Who the call turned out to be for, once authenticated: set by the inner interceptor, read by the access log
    /// of the outer one (a task-local bound inside is gone by then).
    let user = AuthenticatedUserSlot()

    @TaskLocal static var current: GatewayCallInfo?

    static let requestIDKey = "x-request-id"

    /// The client's request id when it is a sane one (printable, at most 128 characters), else a new UUID.
    static func requestID(from metadata: Metadata) -> String {
        if let given = metadata[requestIDKey], !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        {
            return given
        }
        return UUID.random().lowercasedString
    }

    /// `1.2.3.4` from a peer like `ipv4:1.2.3.4:5678`, `::1` from `ipv6:[::1]:5678`.
    static func clientAddress(fromPeer peer: String) -> String {
        if peer.hasPrefix("ipv4:") {
            let rest = peer.dropFirst(5)
            return String(rest[..<(rest.lastIndex(of: ":") ?? rest.endIndex)])
        }
        if peer.hasPrefix("ipv6:["), let end = peer.firstIndex(of: "]") {
            return String(peer[peer.index(peer.startIndex, offsetBy: 6)..<end])
        }
        return peer
    }
}

final class AuthenticatedUserSlot: Sendable {
    private let value = Mutex<UUID?>(nil)

    var userID: UUID? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

/// The outermost interceptor: gives every call a request id (returned in the response headers, bound for the rest
/// of the call, forwarded to services) and logs one structured line per call.
struct RequestLogInterceptor: ServerInterceptor {
    let logger: Logger

    func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        let info = GatewayCallInfo(
            requestID: GatewayCallInfo.requestID(from: context.requestMetadata),
            clientAddress: GatewayCallInfo.clientAddress(fromPeer: context.peer))
        context.addInitialMetadata(GatewayCallInfo.requestIDKey, info.requestID)
        let start = ContinuousClock.now
        var code = RPCStatusCode.ok
        defer {
            let elapsed = ContinuousClock.now - start
            let milliseconds = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
            // `.string` rather than interpolation: the strings are used as they are, not copied (once per call).
            var metadata: Logger.Metadata = [
                "request_id": .string(info.requestID), "client": .string(info.clientAddress),
                "rpc": .string(context.method.path), "status": "\(code)",
                "duration_ms": "\((milliseconds * 1000).rounded() / 1000)",
            ]
            if let userID = info.user.userID { metadata["user_id"] = "\(userID)" }
            logger.info("call", metadata: metadata)
        }
        do {
            try await GatewayCallInfo.$current.withValue(info) { try await next() }
        } catch {
            code = RPCStatusCode(endingWith: error)
            throw error
        }
    }
}

/// Per-client-address rate limit, before any work is done for the call (health checks are exempt: an orchestrator
/// probing from the same address as a flood must still see the truth).
struct AddressRateLimitInterceptor: ServerInterceptor {
    let limiter: RateLimiter
    let metrics: GatewayMetrics

    func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        guard context.method.service != GatewayRoutes.healthService, let info = GatewayCallInfo.current else {
            return try await next()
        }
        if case .limited(let retryAfter) = limiter.acquire(info.clientAddress) {
            metrics.rateLimited(scope: "address")
            throw RPCError.resourceExhausted(
                "too many calls from this address; retry in \(retryAfter.roundedUpToMilliseconds) ms",
                retryAfter: retryAfter)
        }
        try await next()
    }
}

/// Authenticates every call except the ones that sign a user in (`PublicAPI.unauthenticatedMethods`) and the
/// side services, binds ``AuthenticatedCaller/current``, then applies the per-account rate limit.
struct AuthenticationInterceptor: ServerInterceptor {
    let authenticator: Authenticator
    let accountLimiter: RateLimiter
    let metrics: GatewayMetrics

    func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        if PublicAPI.unauthenticatedMethods.contains(context.method.path)
            || GatewayRoutes.sideServices.contains(context.method.service)
        {
            return try await next()
        }
        let caller: AuthenticatedCaller
        do {
            caller = try await authenticator.authenticate(context.requestMetadata)
        } catch {
            metrics.authenticationFailed(reason: error.errorReason ?? "\(error.code)")
            throw error
        }
        GatewayCallInfo.current?.user.userID = caller.userID
        if case .limited(let retryAfter) = accountLimiter.acquire(caller.userID.uuidString) {
            metrics.rateLimited(scope: "account")
            throw RPCError.resourceExhausted(
                "too many calls for this account; retry in \(retryAfter.roundedUpToMilliseconds) ms",
                retryAfter: retryAfter)
        }
        try await AuthenticatedCaller.$current.withValue(caller) { try await next() }
    }
}

/// The gateway's own Prometheus series, next to the per-RPC ones every process has.
struct GatewayMetrics: Sendable {
    let registry: PrometheusCollectorRegistry

    func rateLimited(scope: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "habitflow", subsystem: "gateway", metricName: "rate_limited", unitName: "total",
                helpText: "Calls refused RESOURCE_EXHAUSTED by a rate limit, by scope (address or account)"),
            labels: [("scope", scope)]
        ).increment()
    }

    func authenticationFailed(reason: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "habitflow", subsystem: "gateway", metricName: "authentication_failures",
                unitName: "total", helpText: "Calls refused by authentication, by reason"),
            labels: [("reason", reason)]
        ).increment()
    }
}

extension Duration {
    var roundedUpToMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }
}
