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
    /// When the call's deadline passes (the connection's call deadline timer ends it then).
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
