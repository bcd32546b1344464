internal import HabitFlowLocking

/// Names one RPC method: `/service/method` on the wire.
public struct MethodDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The fully qualified proto service name, for example `grpc.testing.TestService`.
    public let service: String
    /// The method name as written in the proto, for example `UnaryCall`.
    public let method: String
    /// The HTTP/2 `:path`, for example `/grpc.testing.TestService/UnaryCall`.
    public let path: String

    public init(service: String, method: String) {
        self.service = service
        self.method = method
        self.path = "/\(service)/\(method)"
    }

    public var description: String { path }
}

/// The four shapes of RPC.
public enum RPCKind: Sendable, Hashable {
    case unary
    case serverStreaming
    case clientStreaming
    case bidirectionalStreaming

    /// Whether the client sends exactly one request message.
    public var hasSingleRequest: Bool { self == .unary || self == .serverStreaming }
}

/// What a handler knows about the call it serves, and where it puts response metadata.
///
/// One context exists per call; the handler, the interceptors and the transport share it.
public final class ServerContext: Sendable {
    public let method: MethodDescriptor
    /// The client's custom metadata (reserved `grpc-*` fields, pseudo-headers and `te` are not included).
    public let requestMetadata: Metadata
    /// When the client's `grpc-timeout` runs out; the call is cancelled and answered `DEADLINE_EXCEEDED` then.
    public let deadline: ContinuousClock.Instant?
    /// The remote address, for example `ipv4:127.0.0.1:53412`.
    public let peer: String

    private struct ResponseState {
        var initialMetadata = Metadata()
        var trailers = Metadata()
        var compressResponses = false
        var lastRequestCompressed = false
    }

    private let state = Locked(ResponseState())

    public init(method: MethodDescriptor, requestMetadata: Metadata, deadline: ContinuousClock.Instant?, peer: String) {
        self.method = method
        self.requestMetadata = requestMetadata
        self.deadline = deadline
        self.peer = peer
    }

    /// The time left until the deadline (`nil` without one).
    public var timeRemaining: Duration? {
        deadline.map { $0 - ContinuousClock.now }
    }

    /// Metadata sent in the response headers. Changes after the first response message (or after the headers were
    /// flushed) are not sent.
    public var initialMetadata: Metadata {
        get { state.withLock { $0.initialMetadata } }
    }

    /// `neverIndexed`: see ``Metadata/add(_:_:neverIndexed:)``.
    public func addInitialMetadata(_ key: String, _ value: String, neverIndexed: Bool = false) {
        state.withLock { $0.initialMetadata.add(key, value, neverIndexed: neverIndexed) }
    }

    public func addInitialMetadata(_ metadata: Metadata) {
        state.withLock { $0.initialMetadata.add(contentsOf: metadata) }
    }

    /// Metadata sent with the status at the end of the call (also when the handler throws).
    public var trailers: Metadata {
        get { state.withLock { $0.trailers } }
    }

    public func addTrailer(_ key: String, _ value: String, neverIndexed: Bool = false) {
        state.withLock { $0.trailers.add(key, value, neverIndexed: neverIndexed) }
    }

    public func addTrailers(_ metadata: Metadata) {
        state.withLock { $0.trailers.add(contentsOf: metadata) }
    }

    /// Whether response messages are compressed by default (when the client accepts the server's encoding).
    public var compressResponses: Bool {
        get { state.withLock { $0.compressResponses } }
        set { state.withLock { $0.compressResponses = newValue } }
    }

    /// Whether the most recently received request message arrived compressed.
    public var lastRequestCompressed: Bool {
        get { state.withLock { $0.lastRequestCompressed } }
        set { state.withLock { $0.lastRequestCompressed = newValue } }
    }
}
