internal import Foundation
internal import HabitFlowPublicAPI
internal import HabitFlowRPC
internal import Logging
internal import Prometheus
internal import HabitFlowServiceKit
internal import HabitFlowLocking
internal import HabitFlowInternalCredential
internal import HabitFlowCrypto

/// What the gateway knows about the client call it is serving, bound around the rest of the call (the handler:
/// forwarding or the dashboard).
struct GatewayCallInfo: Sendable {
    /// The client's `x-request-id`, or one the gateway made up; returned to the client and passed to services.
    var requestID: String
    /// The client's IP address, as the connection shows it.
    var clientAddress: String
    /// The signed-in user the call acts for, once authenticated (`nil` for the sign-in RPCs and side services).
    var caller: AuthenticatedCaller?

    @TaskLocal static var current: GatewayCallInfo?

    static let requestIDKey = "x-request-id"

    /// What the gateway knows as a call starts: its request id (also put in the response headers) and the client's
    /// address.
    static func starting(_ context: ServerContext) -> GatewayCallInfo {
        let info = GatewayCallInfo(
            requestID: requestID(from: context.requestMetadata), clientAddress: clientAddress(fromPeer: context.peer))
        // Never indexed, as in ``Metadata/addRequestID(_:)``.
        context.addInitialMetadata(requestIDKey, info.requestID, neverIndexed: true)
        return info
    }

    /// The client's request id when it is a sane one (printable, at most 128 characters), else a new UUID.
    static func requestID(from metadata: Metadata) -> String {
        if let given = metadata[requestIDKey], !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        {
            return given
        }
        return newRequestIDs.next().lowercasedString
    }

    private static let newRequestIDs = RequestIDGenerator()

    /// `1.2.3.4` from a peer like `ipv4:1.2.3.4:5678`, `::1` from `ipv6:[::1]:5678`.
    /// Over the UTF-8 view, not characters: it runs on every call.
    static func clientAddress(fromPeer peer: String) -> String {
        let utf8 = peer.utf8
        if peer.hasPrefix("ipv4:") {
            let rest = utf8.index(utf8.startIndex, offsetBy: 5)
            let end = utf8[rest...].lastIndex(of: UInt8(ascii: ":")) ?? utf8.endIndex
            return String(Substring(utf8[rest..<end]))
        }
        if peer.hasPrefix("ipv6:["), let end = utf8.firstIndex(of: UInt8(ascii: "]")) {
            return String(Substring(utf8[utf8.index(utf8.startIndex, offsetBy: 6)..<end]))
        }
        return peer
    }
}

extension CallOptions {
    /// A call the gateway makes itself on the caller's behalf (a dashboard part, a watcher's read): signed for the
    /// caller through a channel's ``InternalCredentialClientInterceptor``, with the client call's request id.
    static func onBehalf(of caller: AuthenticatedCaller, info: GatewayCallInfo?, timeout: Duration) -> CallOptions {
        var options = CallOptions.onBehalf(
            of: caller.userID, sessionID: caller.sessionID, clientAddress: info?.clientAddress, timeout: timeout)
        if let requestID = info?.requestID { options.metadata.addRequestID(requestID) }
        return options
    }
}

/// Version-4-shaped UUIDs for the calls that bring no request id, from xoshiro256** seeded once from OpenSSL.
///
/// A request id only has to be unique, not secret (a client may send any id it likes): OpenSSL's generator cost every
/// such call a `getpid` (its fork check) and a DRBG round, about 2% of the gateway's CPU per forwarded call.
final class RequestIDGenerator: Sendable {
    private let state: Locked<(UInt64, UInt64, UInt64, UInt64)>

    init() {
        var words = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        // xoshiro's state must not be all zeros; 256 random bits are not, in practice, but make sure.
        while words == (0, 0, 0, 0) {
            let seed = SecureRandom.bytes(32).withUnsafeBytes { bytes in
                (0..<4).map { bytes.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) }
            }
            words = (seed[0], seed[1], seed[2], seed[3])
        }
        state = Locked(words)
    }

    func next() -> UUID {
        let (high, low) = state.withLock { state in (Self.step(&state), Self.step(&state)) }
        return UUID(version4Bits: high, low)
    }

    /// One step of xoshiro256** (Blackman and Vigna).
    private static func step(_ s: inout (UInt64, UInt64, UInt64, UInt64)) -> UInt64 {
        let result = rotate(s.1 &* 5, 7) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = rotate(s.3, 45)
        return result
    }

    private static func rotate(_ value: UInt64, _ bits: UInt64) -> UInt64 {
        (value << bits) | (value >> (64 - bits))
    }
}

/// The gateway's one interceptor, around every call, in this order:
///
/// 1. a request id (the client's or a new one), returned in the response headers and passed to services;
/// 2. the per-client-address rate limit, before any work is done for the call (health checks are exempt: an
///    orchestrator probing from the same address as a flood must still see the truth);
/// 3. authentication of every call except the ones that sign a user in (`PublicAPI.unauthenticatedMethods`) and
///    the side services, then the per-account rate limit;
/// 4. the handler, with ``GatewayCallInfo/current`` bound;
/// 5. errors mapped to what a client may see (``ErrorMappingServerInterceptor``), the call counted in the per-RPC
///    metrics every process has, and one structured access-log line (`request_id`, `client`, `rpc`, `status`,
///    `duration_ms`, and `user_id` once known).
///
/// One interceptor rather than one per job: each layer costs every forwarded call a closure, an async frame and,
/// for the ones that bound task-local values, a binding; together they were a measurable share of the gateway's
/// CPU time per call (Benchmarks/README.md, `gateway.sh`).
struct GatewayInterceptor: ServerInterceptor {
    let logger: Logger
    let rpcMetrics: RPCMetricsInterceptor
    let errorMapping: ErrorMappingServerInterceptor
    let addressLimiter: RateLimiter<String>
    let authenticator: Authenticator
    let accountLimiter: RateLimiter<UUID>
    let metrics: GatewayMetrics

    func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        let start = ContinuousClock.now
        var info: GatewayCallInfo
        switch admit(context) {
        case .admitted(let admitted):
            info = admitted
        case .refused(let refused, let error):
            throw failed(context, info: refused, startedAt: start, error: error)
        case .authenticating(let waiting):
            info = waiting
            do {
                try await authenticate(context, &info)
            } catch {
                throw failed(context, info: info, startedAt: start, error: error)
            }
        }
        do {
            try await GatewayCallInfo.$current.withValue(info) { try await next() }
        } catch {
            throw failed(context, info: info, startedAt: start, error: error)
        }
        ended(context, info: info, startedAt: start, code: .ok)
    }

    /// A call that failed with `error`: the error mapped to what a client may see, the call counted and logged.
    /// Returns the mapped error.
    func failed(
        _ context: ServerContext, info: GatewayCallInfo, startedAt start: ContinuousClock.Instant, error: any Error
    ) -> any Error {
        let mapped = errorMapping.mapped(error, method: context.method, metadata: ["request_id": "\(info.requestID)"])
        ended(context, info: info, startedAt: start, code: RPCStatusCode(endingWith: mapped))
        return mapped
    }

    /// Every call's end: counted in the per-RPC metrics and written to the access log.
    func ended(_ context: ServerContext, info: GatewayCallInfo, startedAt start: ContinuousClock.Instant, code: RPCStatusCode) {
        let elapsed = ContinuousClock.now - start
        rpcMetrics.record(context.method, code: code, duration: elapsed)
        logCall(context, info: info, code: code, elapsed: elapsed)
    }

    /// How ``admit(_:)`` decided.
    enum Admission {
        /// Go on with the call (for a token-checked call, `caller` is set).
        case admitted(GatewayCallInfo)
        /// End the call with this error (a rate limit refused it).
        case refused(GatewayCallInfo, RPCError)
        /// The token or its session is not in the caches: ``authenticate(_:_:)`` decides, and may have to wait.
        case authenticating(GatewayCallInfo)
    }

    /// The admission of every call, on both of the gateway's paths: this interceptor and the event-loop fast path
    /// (``GatewayServiceDefinition/unaryForwarder(_:channel:interceptor:credential:defaultTimeout:)``), which runs it
    /// on the connection's event loop and so cannot wait. In order: the request id (also put in the response
    /// headers), the per-address limit, then, for calls that need a token, the caller as the caches know it and the
    /// per-account limit.
    func admit(_ context: ServerContext) -> Admission {
        let method = context.method
        var info = GatewayCallInfo.starting(context)
        do {
            try checkAddressLimit(info, method: method)
        } catch {
            return .refused(info, error)
        }
        if PublicAPI.unauthenticatedMethods.contains(method.path) || GatewayRoutes.sideServices.contains(method.service) {
            return .admitted(info)
        }
        guard let caller = authenticator.cachedActiveCaller(context.requestMetadata) else {
            return .authenticating(info)
        }
        info.caller = caller
        do {
            try checkAccountLimit(caller)
        } catch {
            return .refused(info, error)
        }
        return .admitted(info)
    }

    /// The rest of an ``Admission/authenticating(_:)`` admission: verifies the token and asks whether its session is
    /// active (each only when the caches do not know), then the per-account limit. Sets `info.caller` (also when
    /// the account's limit then refuses the call, so the access log names the user).
    func authenticate(_ context: ServerContext, _ info: inout GatewayCallInfo) async throws(RPCError) {
        let caller: AuthenticatedCaller
        do {
            caller = try await authenticator.authenticate(context.requestMetadata)
        } catch {
            metrics.authenticationFailed(reason: error.errorReason ?? "\(error.code)")
            throw error
        }
        info.caller = caller
        try checkAccountLimit(caller)
    }

    /// The per-client-address limit (health checks are exempt).
    private func checkAddressLimit(_ info: GatewayCallInfo, method: MethodDescriptor) throws(RPCError) {
        guard method.service != GatewayRoutes.healthService,
            case .limited(let retryAfter) = addressLimiter.acquire(info.clientAddress)
        else { return }
        metrics.rateLimited(scope: "address")
        throw RPCError.resourceExhausted(
            "too many calls from this address; retry in \(retryAfter.roundedUpToMilliseconds) ms", retryAfter: retryAfter)
    }

    private func checkAccountLimit(_ caller: AuthenticatedCaller) throws(RPCError) {
        guard case .limited(let retryAfter) = accountLimiter.acquire(caller.userID) else { return }
        metrics.rateLimited(scope: "account")
        throw RPCError.resourceExhausted(
            "too many calls for this account; retry in \(retryAfter.roundedUpToMilliseconds) ms", retryAfter: retryAfter)
    }

    private func logCall(_ context: ServerContext, info: GatewayCallInfo, code: RPCStatusCode, elapsed: Duration) {
        logger.log(
            level: .info, "call",
            fields: AccessLogFields(
                client: info.clientAddress, durationMilliseconds: Self.milliseconds(elapsed),
                requestID: info.requestID, rpc: context.method.path, status: code.description,
                userID: info.caller?.userIDString))
    }

    /// Milliseconds to the microsecond, as a `Double` would print them (`12.0`, `0.05`, `1.234`), without the
    /// cost of formatting a `Double`.
    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let microseconds = max(seconds * 1_000_000 + (attoseconds + 500_000_000_000) / 1_000_000_000_000, 0)
        var fraction = microseconds % 1000
        guard fraction != 0 else { return "\(microseconds / 1000).0" }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let padded = String(fraction)
        return "\(microseconds / 1000)." + String(repeating: "0", count: digits - padded.count) + padded
    }
}

/// The access log line's metadata, in key order: written into the log's batch as it is, with no dictionary or sort
/// (once per call; ``LogLineFields``).
struct AccessLogFields: LogLineFields {
    var client: String
    var durationMilliseconds: String
    var requestID: String
    var rpc: String
    var status: String
    /// Once the call is authenticated.
    var userID: String?

    func forEachField(_ field: (_ key: String, _ value: String) -> Void) {
        field("client", client)
        field("duration_ms", durationMilliseconds)
        field("request_id", requestID)
        field("rpc", rpc)
        field("status", status)
        if let userID { field("user_id", userID) }
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

extension Metadata {
    /// Adds the call's request id (`x-request-id`). It is unique to the call, so it is sent never indexed: in HPACK's
    /// tables it would only push out fields that repeat.
    mutating func addRequestID(_ requestID: String) {
        add(GatewayCallInfo.requestIDKey, requestID, neverIndexed: true)
    }
}
