public import HabitFlowRPC
public import NIOCore

// The server's hook for a proxy's event-loop fast path (`HabitFlowRPCProxy`): a unary call whose request is in may be
// taken on the connection's event loop, before any interceptor and without a task. Whatever a forwarder cannot finish
// there continues in a task (``ForwardedCallResponder/continueInTask(_:)``).

/// A service some of whose unary methods have an event-loop fast path; the server asks once per method as it is
/// made, and tries the forwarder before the method's handler.
public protocol UnaryForwardingService: RPCService {
    func unaryForwarder(for method: ServerMethod) -> (any UnaryCallForwarder)?
}

/// Takes unary calls of one method on the server connection's event loop; the method's handler stays the path for
/// everything it declines.
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
