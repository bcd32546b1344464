public import HabitFlowHTTP2
public import HabitFlowTLS
internal import HabitFlowRPC

/// Everything an ``RPCChannel`` can be told, with gRPC's defaults where gRPC has one.
public struct RPCChannelConfiguration: Sendable {
    /// One server address; several targets are replicas of one service, picked round-robin.
    public struct Target: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public var targets: [Target]

    /// TLS with ALPN `h2` when set (the target's host is the expected server name); h2c with prior knowledge
    /// otherwise.
    public var tls: TLSConfiguration?

    /// HTTP/2 settings and receive windows (large by default, so big messages flow).
    public var http2: HTTP2Configuration

    /// Connections opened to each target, each on its own event loop while there are loops. More than one spreads
    /// load over several event loops (and server connections); calls are distributed round-robin over all ready
    /// connections, except that a caller running on an event loop (a server handler) uses the connection to the
    /// picked target on its own loop when there is one. One per loop of the channel's group therefore keeps calls made
    /// from server handlers (a gateway forwarding) on one thread.
    public var connectionsPerTarget = 1

    /// How long opening a connection (TCP, TLS, the server's SETTINGS) may take.
    public var connectTimeout: Duration = .seconds(20)

    /// Pacing of reconnection attempts to a target that failed.
    public var backoff = ConnectionBackoff()

    /// Client pings; `nil` (the default) sends none.
    public var keepalive: Keepalive?

    /// Retries of idempotent calls and their budget.
    public var retry = RetryPolicy()

    /// The largest response message accepted, after decompression (gRPC's default is 4 MiB).
    public var maxReceiveMessageSize = 4 << 20

    /// Complete response messages queued per call before the stream's flow-control window stops reopening.
    public var responseQueueHighWatermark = 16
    /// Request bytes queued per call before `send` suspends (flow-control back-pressure towards writers).
    public var requestQueueHighWatermark = 1 << 20

    /// The `:authority` sent (default: the target's `host:port`).
    public var authority: String?

    /// What the channel's own errors call the server, for example `"habits"`: "the habits service is unavailable;
    /// retry later". Default `nil`: "the server is unavailable; retry later".
    ///
    /// Such messages name no address or system error, since a service may pass them on to its own client; the
    /// details are the error's ``RPCError/cause``.
    public var serviceName: String?

    public var userAgent = "habitflow-swift-rpc/1"

    public init(targets: [Target], tls: TLSConfiguration? = nil, http2: HTTP2Configuration = .init()) {
        precondition(!targets.isEmpty, "a channel needs at least one target")
        self.targets = targets
        self.tls = tls
        self.http2 = http2
        self.http2.manualFlowControl = true
    }

    public init(host: String, port: Int, tls: TLSConfiguration? = nil) {
        self.init(targets: [Target(host: host, port: port)], tls: tls)
    }

    /// Exponential reconnection backoff (gRPC's connection-backoff spec): each delay is the previous one times
    /// `multiplier`, capped at `maximum`, then spread by ±`jitter`.
    public struct ConnectionBackoff: Sendable {
        public var initial: Duration = .seconds(1)
        public var multiplier = 1.6
        public var jitter = 0.2
        public var maximum: Duration = .seconds(120)

        public init() {}

        /// The delay before attempt `failures + 1`, after `failures` consecutive failed attempts (≥ 1).
        public func delay(afterFailures failures: Int) -> Duration {
            var seconds = initial.seconds
            for _ in 1..<max(failures, 1) { seconds = min(seconds * multiplier, maximum.seconds) }
            seconds = min(seconds, maximum.seconds)
            return .seconds(seconds * (1 + Double.random(in: -jitter...jitter)))
        }
    }

    /// Client keepalive (gRFC A8). Servers punish pings more frequent than they allow (gRPC's default: one per
    /// 5 minutes with calls active) with GOAWAY `too_many_pings`; the interval then doubles.
    public struct Keepalive: Sendable {
        /// Time between pings on a connection that has not read anything meanwhile.
        public var interval: Duration = .seconds(5 * 60)
        /// A ping unanswered this long closes the connection (its calls fail `UNAVAILABLE`).
        public var timeout: Duration = .seconds(20)
        /// Whether to ping connections without calls (servers by default count those pings as strikes).
        public var permitWithoutCalls = false

        public init(interval: Duration = .seconds(5 * 60), timeout: Duration = .seconds(20)) {
            self.interval = interval
            self.timeout = timeout
        }
    }

    /// Retries of `UNAVAILABLE` for idempotent single-request calls (gRFC A6), throttled per channel.
    ///
    /// Streams the server never processed (refused, or above a GOAWAY's last stream id) are re-sent for every
    /// single-request call, idempotent or not, up to `maxAttempts` (gRPC's transparent retry).
    public struct RetryPolicy: Sendable {
        /// Attempts per call, the first included.
        public var maxAttempts = 5
        /// Attempt n waits a random time in [0, min(initialBackoff × multiplier^(n-2), maxBackoff)].
        public var initialBackoff: Duration = .milliseconds(100)
        public var maxBackoff: Duration = .seconds(1)
        public var backoffMultiplier = 2.0
        /// Retry budget (gRFC A6 throttling): a token bucket of `maxTokens`; every failed attempt takes one, every
        /// successful call gives back `tokenRatio`; retries stop while at most half the tokens are left.
        public var maxTokens = 10.0
        public var tokenRatio = 0.1

        public init() {}
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension RPCChannelConfiguration {
    /// The `UNAVAILABLE` of a call whose server could not be reached: the message says which service and to retry,
    /// `detail` (the address, what failed) is the cause, for logs.
    func unavailable(_ detail: String) -> RPCError {
        let server = serviceName.map { "the \($0) service" } ?? "the server"
        return RPCError(
            .unavailable, "\(server) is unavailable; retry later", cause: ConnectionFailure(description: detail))
    }
}

/// Why a connection could not be used (an address and a system error), the cause of the `UNAVAILABLE` a call gets.
struct ConnectionFailure: Error, CustomStringConvertible {
    var description: String
}
