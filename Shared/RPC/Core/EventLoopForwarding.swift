public import NIOCore

// The event-loop fast path of a proxy (the gateway): a unary call whose request is in is passed on to a backend
// connection on the same event loop and its response piped back, with no task, no client call object and no thread
// hop. Everything here runs on that event loop; whatever a forwarder cannot finish there continues in a task
// (``ForwardedCallResponder/continueInTask(_:)``).

/// Takes unary calls of one method on the server connection's event loop (set as ``ServerMethod/unaryForwarder``);
/// ``ServerMethod/run`` stays the path for everything it declines.
public protocol UnaryCallForwarder: Sendable {
    /// Called on the connection's event loop once the call's one request message and the client's half-close are
    /// in, before any interceptor runs. Returns false to decline: nothing may have been sent, added to the context or
    /// registered with `responder` then, and the call goes to the method's handler (with the interceptors) as usual.
    /// Returns true when the call is answered through `responder`.
    func forward(_ request: ReceivedMessage, context: ServerContext, responder: any ForwardedCallResponder) -> Bool
}

/// The server side of a call a ``UnaryCallForwarder`` took (event loop only).
public protocol ForwardedCallResponder: Sendable {
    /// Queues the response message; the response headers go first, with the context's initial metadata.
    func sendResponse(_ payload: ByteBuffer, compressed: Bool)
    /// Ends the call as a handler's return (`OK`, with the context's trailers) or throw (the error's status) would.
    func finish(_ outcome: Result<Void, any Error>)
    /// `cancel` runs once, on the event loop, if the call ends from the client's or the server's side before
    /// ``finish(_:)``: the client reset the stream or went away, the deadline passed, the server stopped.
    func onCancel(_ cancel: @escaping @Sendable () -> Void)
    /// Continues the call in a task running `handler` as its handler (without the interceptors: the forwarder did
    /// their part), for what cannot be done on the event loop, such as waiting for a connection or a retry. The
    /// ``onCancel(_:)`` registration is dropped; cancellation reaches the task.
    func continueInTask(_ handler: @escaping @Sendable (any ServerCallTransport) async throws -> Void)
}

/// Receives, on the channel's event loop, the response of a call started with
/// `RPCChannel.forwardOnCurrentEventLoop`: headers, then messages, then exactly one end.
public protocol ForwardedResponseReceiver: Sendable {
    func receiveHeaders(_ metadata: Metadata)
    func receiveMessage(_ message: ReceivedMessage)
    /// The call ended: OK with its trailers, or its error (trailers in ``RPCError/trailers``). `retryable` says that
    /// the channel's retry policy would try the call again (no response headers arrived, and the stream never reached
    /// the server, or the call is idempotent, failed `UNAVAILABLE` and the channel's retry budget allows it): a
    /// retrying client call may take it from here (its attempts then come on top of this one).
    func receiveEnd(_ outcome: Result<Metadata, RPCError>, retryable: Bool)
}
