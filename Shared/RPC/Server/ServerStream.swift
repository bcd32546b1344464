internal import HabitFlowRPC
internal import NIOCore

/// A call on the HTTP/2 connection.
typealias ServerStream = ServerCall<ServerConnectionHandler>

/// One call on a connection, owned by the connection's handler (event loop only).
final class ServerCall<Connection: ServerCallConnection> {
    let streamID: Int32
    let context: ServerContext
    let transport: CallTransport<Connection>
    let requestEncoding: MessageEncoding?
    let acceptsGzip: Bool
    var deframer: MessageDeframer
    var task: Task<Void, Never>?
    /// Cancels the backend call of a call a ``UnaryCallForwarder`` took, while it runs.
    var cancelForwarding: (@Sendable () -> Void)?
    /// The handler returned or threw (possibly before `task` was even assigned, when it never suspended).
    var handlerFinished = false
    /// When the call's deadline passes (the connection's ``ConnectionDeadlineTimer`` ends it then).
    var timerDeadline: NIODeadline?
    var headersSent = false
    var statusSent = false
    var requestsEnded = false
    var responseEncoding: MessageEncoding = .identity
    var responseWaiter: UnsafeContinuation<Void, any Error>?
    /// Received bytes whose flow-control credit is held back (back-pressure).
    var withheldBytes = 0
    /// A web call's request decoding and response encoding (`nil` for native gRPC).
    var web: WebCallCodec?

    init(
        streamID: Int32, context: ServerContext, transport: CallTransport<Connection>, requestEncoding: MessageEncoding?,
        acceptsGzip: Bool, maxReceiveMessageSize: Int
    ) {
        self.streamID = streamID
        self.context = context
        self.transport = transport
        self.requestEncoding = requestEncoding
        self.acceptsGzip = acceptsGzip
        self.deframer = MessageDeframer(maxMessageSize: maxReceiveMessageSize)
    }

    /// Stops everything running for the call: the handler is cancelled and its reads and writes fail.
    func abandon(error: any Error) {
        task?.cancel()
        task = nil
        if let cancel = cancelForwarding {
            cancelForwarding = nil
            cancel()
        }
        transport.failRequests(error)
        if let waiter = responseWaiter {
            responseWaiter = nil
            waiter.resume(throwing: error)
        }
    }
}

/// Ping strikes (gRFC A8): pings closer together than the policy allows count; HEADERS or DATA sent reset them.
struct KeepalivePolicy {
    private var strikes = 0
    private var lastPing: NIODeadline?

    /// Records a ping; false when the client has used up its strikes.
    mutating func pingReceived(hasActiveCalls: Bool, policy: RPCServerConfiguration.Keepalive) -> Bool {
        let now = NIODeadline.now()
        let minimum =
            hasActiveCalls || policy.permitPingsWithoutCalls
            ? TimeAmount(policy.minPingIntervalWithCalls) : .hours(2)
        if let lastPing, now - lastPing < minimum { strikes += 1 }
        lastPing = now
        return strikes <= policy.maxPingStrikes
    }

    mutating func dataOrHeadersSent() {
        strikes = 0
        lastPing = nil
    }
}
