public import HabitFlowHTTP2
public import HabitFlowRPCWeb
public import HabitFlowTLS

/// Everything an ``RPCServer`` can be told, with defaults that suit the local stack.
public struct RPCServerConfiguration: Sendable {
    /// Address to bind; port 0 picks a free port (see ``RPCServer/localAddress``).
    public var host: String
    public var port: Int

    /// TLS 1.3 with ALPN `h2` when set; cleartext HTTP/2 with prior knowledge (h2c) otherwise.
    public var tls: TLSConfiguration?

    /// HTTP/2 SETTINGS and flow-control windows.
    public var http2: HTTP2Configuration

    /// Web protocols next to native gRPC when set: gRPC-Web and Connect unary (by content type), CORS preflights, and
    /// HTTP/1.1 on the same port (without TLS; browsers speak HTTP/2 over TLS). `nil` (the default): native gRPC
    /// only, exactly as without this setting (other content types 415, HTTP/1.1 bytes close the connection).
    public var web: WebConfiguration?

    /// The largest request message accepted, after decompression (gRPC's default is 4 MiB).
    public var maxReceiveMessageSize: Int = 4 << 20

    /// Where handlers run. `.eventLoop` keeps short handlers on the connection's thread (no hops); handlers then must
    /// never block (run bcrypt or libpq calls on a thread pool).
    public var handlerExecution: HandlerExecution = .eventLoop

    public var keepalive = Keepalive()
    public var connectionManagement = ConnectionManagement()

    /// Bytes queued per stream before a writer suspends (flow-control back-pressure towards handlers).
    public var responseQueueHighWatermark: Int = 1 << 20
    /// Bytes queued on a whole connection before its writers suspend, except those whose own stream's queue has
    /// drained (so the streams a client reads are not held up by those it does not). What a client that reads nothing
    /// makes the server hold stays near this plus one message per stream, not ``responseQueueHighWatermark`` times
    /// the concurrent streams.
    public var connectionResponseQueueHighWatermark: Int = 8 << 20
    /// Complete request messages queued per stream before we stop opening the client's flow-control window.
    public var requestQueueHighWatermark: Int = 16

    public enum HandlerExecution: Sendable {
        case eventLoop
        case globalConcurrentExecutor
    }

    /// Ping policy (gRFC A8).
    public struct Keepalive: Sendable {
        /// Pings closer together than this are strikes, while calls are active.
        public var minPingIntervalWithCalls: Duration = .seconds(5 * 60)
        /// Whether clients may ping with no call active (otherwise each such ping within two hours is a strike).
        public var permitPingsWithoutCalls = false
        /// Strikes allowed before GOAWAY ENHANCE_YOUR_CALM `too_many_pings`.
        public var maxPingStrikes = 2
        /// We ping a connection idle for this long, to find dead peers (`nil`: never).
        public var pingInterval: Duration? = .seconds(2 * 60 * 60)
        /// A ping unanswered this long closes the connection.
        public var pingTimeout: Duration = .seconds(20)

        public init() {}
    }

    public struct ConnectionManagement: Sendable {
        /// A connection without calls for this long is closed gracefully (`nil`: never).
        public var idleTimeout: Duration? = .seconds(30 * 60)
        /// Connections older than this are asked to go away, so clients rebalance after scale-out (`nil`: never).
        public var maxConnectionAge: Duration?
        /// How long calls in flight may take to finish once a graceful shutdown or max-age GOAWAY started.
        public var gracePeriod: Duration = .seconds(10)
        /// How long a client may take over its connection preface (counted from the accept, so a TLS handshake
        /// included) and over each header block once its first byte arrived; a client slower than this (slowloris)
        /// gets GOAWAY ENHANCE_YOUR_CALM `header_timeout` and is disconnected (`nil`: no limit).
        public var headerTimeout: Duration? = .seconds(10)
        /// A connection that wrote nothing for this long gives back what it does not need while quiet: the pages of
        /// nghttp2's 16 KiB frame buffer and, with no stream open, of its stream table, and the header strings kept for
        /// reuse (its next call takes them again) (`nil`: never).
        public var idleMemoryReleaseDelay: Duration? = .seconds(5)

        public init() {}
    }

    public init(host: String = "127.0.0.1", port: Int, tls: TLSConfiguration? = nil, http2: HTTP2Configuration = .init())
    {
        self.host = host
        self.port = port
        self.tls = tls
        self.http2 = http2
        self.http2.manualFlowControl = true
    }
}
