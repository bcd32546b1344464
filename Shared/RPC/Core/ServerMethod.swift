public import NIOCore
public import SwiftProtobuf

/// One received request message, already decompressed.
public struct ReceivedMessage: Sendable {
    public var payload: ByteBuffer
    /// Whether it travelled compressed.
    public var wasCompressed: Bool

    public init(payload: ByteBuffer, wasCompressed: Bool) {
        self.payload = payload
        self.wasCompressed = wasCompressed
    }
}

/// What a transport offers the handler of one call: request messages in, response messages out.
///
/// The transport sends the status itself when the handler returns or throws.
public protocol ServerCallTransport: Sendable {
    /// The next request message; `nil` once the client half-closed. Throws `CancellationError` when the call is
    /// cancelled.
    func nextRequest() async throws -> ReceivedMessage?
    /// Sends one response message (the response headers go first, with the context's initial metadata). Suspends
    /// while the peer's flow-control window and the stream's send queue are full.
    func sendResponse(_ payload: ByteBuffer, compressed: Bool) async throws
    /// Sends the response headers now, with the context's initial metadata, unless they went out already (otherwise
    /// they go with the first response message or the status). A proxy passes a backend's headers on with it as soon
    /// as they arrive. Throws when the call has ended.
    func sendInitialMetadata() async throws
}

/// A service implementation a server routes calls to. Generated `…Service.Handler` protocols refine it and provide
/// both requirements, so an implementation writes only its RPC methods.
public protocol RPCService: Sendable {
    /// The fully qualified proto name, for example `grpc.health.v1.Health`.
    var serviceName: String { get }
    var methods: [ServerMethod] { get }
}

/// A routable method: its descriptor, its kind and a type-erased handler over raw messages.
public struct ServerMethod: Sendable {
    public let descriptor: MethodDescriptor
    public let kind: RPCKind
    public let run: @Sendable (_ context: ServerContext, _ transport: any ServerCallTransport) async throws -> Void
    /// How the method's messages read and write as JSON, for web clients (Connect with `application/json`); `nil`
    /// when its message types are unknown here (such a method answers JSON calls `UNIMPLEMENTED`).
    public var jsonTranscoder: (any MessageJSONTranscoding)?

    public init(
        descriptor: MethodDescriptor, kind: RPCKind,
        run: @escaping @Sendable (ServerContext, any ServerCallTransport) async throws -> Void
    ) {
        self.descriptor = descriptor
        self.kind = kind
        self.run = run
    }

    public static func unary<Request: Message, Response: Message>(
        _ descriptor: MethodDescriptor, _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) -> ServerMethod {
        ServerMethod(descriptor: descriptor, kind: .unary) { context, transport in
            let request: Request = try await receiveSingleRequest(context: context, transport: transport)
            let response = try await handler(request, context)
            try await transport.sendResponse(try encode(response), compressed: context.compressResponses)
        }.transcodingJSON(Request.self, Response.self)
    }

    public static func serverStreaming<Request: Message, Response: Message>(
        _ descriptor: MethodDescriptor,
        _ handler: @escaping @Sendable (Request, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) -> ServerMethod {
        ServerMethod(descriptor: descriptor, kind: .serverStreaming) { context, transport in
            let request: Request = try await receiveSingleRequest(context: context, transport: transport)
            try await handler(request, ResponseWriter(transport: transport, context: context), context)
        }.transcodingJSON(Request.self, Response.self)
    }

    public static func clientStreaming<Request: Message, Response: Message>(
        _ descriptor: MethodDescriptor,
        _ handler: @escaping @Sendable (RequestStream<Request>, ServerContext) async throws -> Response
    ) -> ServerMethod {
        ServerMethod(descriptor: descriptor, kind: .clientStreaming) { context, transport in
            let response = try await handler(RequestStream(transport: transport, context: context), context)
            try await transport.sendResponse(try encode(response), compressed: context.compressResponses)
        }.transcodingJSON(Request.self, Response.self)
    }

    public static func bidirectionalStreaming<Request: Message, Response: Message>(
        _ descriptor: MethodDescriptor,
        _ handler: @escaping @Sendable (RequestStream<Request>, ResponseWriter<Response>, ServerContext) async throws
            -> Void
    ) -> ServerMethod {
        ServerMethod(descriptor: descriptor, kind: .bidirectionalStreaming) { context, transport in
            try await handler(
                RequestStream(transport: transport, context: context),
                ResponseWriter(transport: transport, context: context), context)
        }.transcodingJSON(Request.self, Response.self)
    }

    /// This method with the JSON transcoder of its message types.
    public func transcodingJSON<Request: Message, Response: Message>(
        _ request: Request.Type, _ response: Response.Type
    ) -> ServerMethod {
        var method = self
        method.jsonTranscoder = JSONTranscoder(request, response)
        return method
    }
}

/// The typed request messages of a client- or bidirectional-streaming call.
public struct RequestStream<Message: SwiftProtobuf.Message>: AsyncSequence, Sendable {
    public typealias Element = Message
    let transport: any ServerCallTransport
    let context: ServerContext

    public struct AsyncIterator: AsyncIteratorProtocol {
        let transport: any ServerCallTransport
        let context: ServerContext

        public mutating func next() async throws -> Message? {
            guard let received = try await transport.nextRequest() else { return nil }
            context.lastRequestCompressed = received.wasCompressed
            return try HabitFlowRPC.decode(received.payload)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(transport: transport, context: context)
    }
}

/// Sends the typed response messages of a server- or bidirectional-streaming call.
public struct ResponseWriter<Message: SwiftProtobuf.Message>: Sendable {
    let transport: any ServerCallTransport
    let context: ServerContext

    /// Sends one message, compressed when `compressed` says so (default: the context's ``ServerContext/compressResponses``).
    /// Suspends while the client is not reading (HTTP/2 flow control).
    public func write(_ message: Message, compressed: Bool? = nil) async throws {
        try await transport.sendResponse(try encode(message), compressed: compressed ?? context.compressResponses)
    }
}

private func receiveSingleRequest<Request: Message>(
    context: ServerContext, transport: any ServerCallTransport
) async throws -> Request {
    try decode(try await receiveSingleMessage(context: context, transport: transport).payload)
}

/// The one request message of a unary or server-streaming call (`UNIMPLEMENTED` for none or several).
package func receiveSingleMessage(context: ServerContext, transport: any ServerCallTransport) async throws -> ReceivedMessage {
    guard let first = try await transport.nextRequest() else {
        throw RPCError(.unimplemented, "\(context.method.path) expects exactly one request message, got none")
    }
    guard try await transport.nextRequest() == nil else {
        throw RPCError(.unimplemented, "\(context.method.path) expects exactly one request message, got more")
    }
    context.lastRequestCompressed = first.wasCompressed
    return first
}

func decode<Message: SwiftProtobuf.Message>(_ payload: ByteBuffer) throws -> Message {
    do {
        return try Message(serializedBytes: ProtobufBuffer(payload))
    } catch {
        // The client's mistake: said in words, not logged.
        throw RPCError(.internal, "could not parse the \(Message.protoMessageName) message: \(parseFailure(error))")
    }
}

/// Why a request did not parse, in words rather than the decoder's case names.
private func parseFailure(_ error: any Error) -> String {
    switch error as? BinaryDecodingError {
    case .truncated?: "it is truncated"
    case .invalidUTF8?: "a string field is not valid UTF-8"
    case .messageDepthLimit?: "it nests messages too deeply"
    default: "it is not valid protobuf"
    }
}

/// Serializes `message` into a buffer with ``framingHeadroom`` in front (see ``framedMessage(_:compressed:allocator:)``).
func encode(_ message: some SwiftProtobuf.Message) throws -> ByteBuffer {
    do {
        let serialized: ProtobufBuffer = try message.serializedBytes()
        return serialized.buffer
    } catch {
        throw RPCError(.internal, "could not serialize the response", cause: error)
    }
}
