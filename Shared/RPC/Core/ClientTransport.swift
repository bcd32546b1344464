public import NIOCore

/// What a client transport (``RPCClientTransport``) offers one call: request messages out, response parts in.
///
/// Messages are serialized but not framed or compressed: the transport does both. Errors are ``RPCError``s.
public protocol ClientCallStream: Sendable {
    /// Sends one request message. Suspends while HTTP/2 flow control holds the stream back.
    func send(_ message: ByteBuffer) async throws
    /// Half-closes the call: no more requests follow.
    func finishRequests() async
    /// The metadata of the response headers. Throws the call's error when it failed without any (Trailers-Only).
    func initialMetadata() async throws -> Metadata
    /// The next response message (decompressed, with whether it travelled compressed); `nil` once the call ended
    /// with OK. Throws the call's ``RPCError`` otherwise.
    func nextReceivedMessage() async throws -> ReceivedMessage?
    /// The trailing metadata, once the call ended (empty before).
    var trailers: Metadata { get }
    /// Ends the call now (RST_STREAM CANCEL): waiting reads and writes throw `CANCELLED`. No effect once it ended.
    func cancel()
}

extension ClientCallStream {
    /// The next response message's payload; `nil` once the call ended with OK.
    public func nextMessage() async throws -> ByteBuffer? {
        try await nextReceivedMessage()?.payload
    }
}

/// Carries client calls to servers: the layer generated clients call (``RPCChannel`` in HabitFlowRPCClient).
public protocol RPCClientTransport: Sendable {
    /// Starts a call: runs the interceptors, picks a connection and sends the request headers.
    ///
    /// With `singleRequest` (unary and server-streaming calls) the message and the half-close follow at once, and
    /// the transport may send the call again when an attempt fails before any response arrived (see
    /// ``CallOptions/idempotent``).
    func startCall(
        _ method: MethodDescriptor, options: CallOptions, singleRequest: ByteBuffer?
    ) async throws -> any ClientCallStream
}

/// A call as client interceptors see it: the method and the options it goes out with.
public struct ClientCallDetails: Sendable {
    public let method: MethodDescriptor
    public var options: CallOptions

    public init(method: MethodDescriptor, options: CallOptions) {
        self.method = method
        self.options = options
    }
}

/// Observes and shapes every call of a channel, for authentication, deadlines, logging, metrics and tracing.
///
/// Interceptors run in order before a call starts (once per call, not per retry attempt), and again when it ended.
public protocol ClientInterceptor: Sendable {
    /// Before the call starts: may add metadata, change the deadline, or throw an ``RPCError`` to refuse the call.
    func willStart(_ call: inout ClientCallDetails) async throws
    /// Once the call ended: with its status (`OK`, the error's code, or `CANCELLED`) and how long it took.
    func didFinish(_ call: ClientCallDetails, status: RPCStatus, duration: Duration)
}

extension ClientInterceptor {
    public func willStart(_ call: inout ClientCallDetails) async throws {}
    public func didFinish(_ call: ClientCallDetails, status: RPCStatus, duration: Duration) {}
}
