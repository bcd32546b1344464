public import HabitFlowRPC
public import HabitFlowRPCServer
public import NIOCore

/// Serves a service by passing every call on to another server, without decoding its messages: what a gateway
/// registers for each public service it fronts.
///
/// Each method forwards the raw messages both ways (all four kinds of RPC), the request metadata without hop-by-hop
/// fields, the remaining deadline, cancellation both ways (a client that goes away cancels the backend call; a
/// backend that cancels ends the client's call `CANCELLED`), and the backend's response metadata, status, message,
/// `grpc-status-details-bin` and trailers unchanged. Compressed response messages stay compressed for clients that
/// accept gzip.
///
/// ```swift
/// let habits = ForwardingService(
///     schema: try ServiceSchema.load("habitflow.habits.v1.HabitsService", fromDescriptorSets: [...]),
///     transport: habitsChannel
/// ) { method, context, options in
///     options.metadata.removeAll("authorization")  // shape each outgoing call here
/// }
/// ```
public struct ForwardingService: UnaryForwardingService {
    /// Shapes the options of one outgoing call, which start as ``CallOptions/forwarding(_:from:)`` made them; throws
    /// to refuse the call.
    public typealias PrepareCall = @Sendable (
        _ method: MethodSchema, _ context: ServerContext, _ options: inout CallOptions
    ) async throws -> Void

    /// The event-loop fast path of a unary method, if it has one (see ``UnaryCallForwarder``).
    public typealias UnaryForwarders = @Sendable (_ method: MethodSchema) -> (any UnaryCallForwarder)?

    public let schema: ServiceSchema
    private let transport: any RPCClientTransport
    private let unaryForwarders: UnaryForwarders
    private let jsonTranscoders: [String: any MessageJSONTranscoding]
    private let prepare: PrepareCall

    /// - Parameter jsonTranscoders: by method name (the generated `…Service.jsonTranscoders`), for web clients that
    ///   send JSON; the forwarding itself stays binary. A method without one answers JSON calls `UNIMPLEMENTED`.
    public init(
        schema: ServiceSchema, transport: any RPCClientTransport, unaryForwarders: @escaping UnaryForwarders = { _ in nil },
        jsonTranscoders: [String: any MessageJSONTranscoding] = [:], prepare: @escaping PrepareCall = { _, _, _ in }
    ) {
        self.schema = schema
        self.transport = transport
        self.unaryForwarders = unaryForwarders
        self.jsonTranscoders = jsonTranscoders
        self.prepare = prepare
    }

    public var serviceName: String { schema.name }

    public var methods: [ServerMethod] {
        schema.methods.map { schema in
            var method = ServerMethod.forwarding(schema, to: transport, prepare: prepare)
            method.jsonTranscoder = jsonTranscoders[schema.descriptor.method]
            return method
        }
    }

    public func unaryForwarder(for method: ServerMethod) -> (any UnaryCallForwarder)? {
        schema.methods.first { $0.descriptor == method.descriptor }.flatMap(unaryForwarders)
    }
}

extension ServerMethod {
    /// A method that passes its calls on to `transport` (see ``ForwardingService``).
    public static func forwarding(
        _ method: MethodSchema, to transport: any RPCClientTransport,
        prepare: @escaping ForwardingService.PrepareCall = { _, _, _ in }
    ) -> ServerMethod {
        ServerMethod(descriptor: method.descriptor, kind: method.kind) { context, incoming in
            var options = CallOptions.forwarding(method, from: context)
            try await prepare(method, context, &options)
            if method.kind.hasSingleRequest {
                let request = try await receiveSingleMessage(context: context, transport: incoming)
                try await ForwardingService.relay(
                    method, request: request.payload, options: options, over: transport, to: incoming, context: context)
            } else {
                let call = try await transport.startCall(method.descriptor, options: options, singleRequest: nil)
                defer { call.cancel() }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await relayRequests(from: incoming, to: call) }
                    defer { group.cancelAll() }
                    try await relayResponses(
                        of: call, to: incoming, context: context, streamed: method.kind == .bidirectionalStreaming)
                }
            }
        }
    }
}

extension ForwardingService {
    /// Passes on a unary or server-streaming call whose request is in hand and whose options are shaped: what a
    /// forwarding method does after `prepare`, and how a ``UnaryCallForwarder`` continues a call in a task.
    public static func relay(
        _ method: MethodSchema, request: ByteBuffer, options: CallOptions, over transport: any RPCClientTransport,
        to incoming: any ServerCallTransport, context: ServerContext
    ) async throws {
        let call = try await transport.startCall(method.descriptor, options: options, singleRequest: request)
        defer { call.cancel() }
        try await relayResponses(of: call, to: incoming, context: context, streamed: method.kind == .serverStreaming)
    }
}

extension CallOptions {
    /// The options a forwarded call starts from: the incoming call's deadline (the backend gets the remaining
    /// budget as its `grpc-timeout`), its metadata without hop-by-hop fields, a child span of its `traceparent`, and
    /// the method's idempotency (so reads and idempotent writes are retried on `UNAVAILABLE`).
    public static func forwarding(_ method: MethodSchema, from context: ServerContext) -> CallOptions {
        var options = CallOptions(
            deadline: context.deadline, metadata: context.requestMetadata.removingHopByHopFields(),
            idempotent: method.idempotency.allowsRetry)
        if let parent = options.metadata[TraceContext.headerName].flatMap(TraceContext.init(traceparent:)) {
            options.metadata.setTraceContext(parent.child())
        }
        return options
    }
}

/// Client messages to the backend, then the half-close. A failing client side cancels the backend call; a failing
/// send means the backend call ended, and its status reaches the client through the response side.
private func relayRequests(from incoming: any ServerCallTransport, to call: any ClientCallStream) async {
    while true {
        let message: ReceivedMessage?
        do {
            message = try await incoming.nextRequest()
        } catch {
            call.cancel()
            return
        }
        guard let message else { break }
        do {
            try await call.send(message.payload)
        } catch {
            return
        }
    }
    await call.finishRequests()
}

/// The backend's response headers, messages and trailers (or its error, with its trailers) to the client.
private func relayResponses(
    of call: any ClientCallStream, to incoming: any ServerCallTransport, context: ServerContext, streamed: Bool
) async throws {
    do {
        let headers = try await call.initialMetadata()
        context.addInitialMetadata(headers.removingHopByHopFields())
        // Streamed responses may be slow to come: the client sees the headers now. A single response carries them.
        if streamed { try await incoming.sendInitialMetadata() }
        while let message = try await call.nextReceivedMessage() {
            try await incoming.sendResponse(message.payload, compressed: message.wasCompressed || context.compressResponses)
        }
        context.addTrailers(call.trailers.removingHopByHopFields())
    } catch var error as RPCError {
        error.trailers = error.trailers.removingHopByHopFields()
        throw error
    }
}
