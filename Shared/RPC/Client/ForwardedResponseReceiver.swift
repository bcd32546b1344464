public import HabitFlowRPC

/// Receives, on the channel's event loop, the response of a call started with
/// ``RPCChannel/forwardOnCurrentEventLoop(_:options:request:to:)`` (a proxy's fast path): headers, then messages,
/// then exactly one end.
public protocol ForwardedResponseReceiver: Sendable {
    func receiveHeaders(_ metadata: Metadata)
    func receiveMessage(_ message: ReceivedMessage)
    /// The call ended: OK with its trailers, or its error (trailers in ``RPCError/trailers``). `retryable` says that
    /// the channel's retry policy would try the call again (no response headers arrived, and the stream never reached
    /// the server, or the call is idempotent, failed `UNAVAILABLE` and the channel's retry budget allows it): a
    /// retrying client call may take it from here (its attempts then come on top of this one).
    func receiveEnd(_ outcome: Result<Metadata, RPCError>, retryable: Bool)
}
