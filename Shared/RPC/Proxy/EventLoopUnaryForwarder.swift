public import HabitFlowRPC
public import HabitFlowRPCClient
public import HabitFlowRPCServer
internal import NIOCore

/// Passes unary calls of one method on through a channel, on the server connection's event loop: the request goes
/// out on a ready connection on the same loop and the response comes back as it arrives, with no task, no client
/// call object and no thread hop (a proxy's fast path; see ``UnaryCallForwarder``). `decide` runs first, per call,
/// on the event loop: it declines (the method's general path takes the call), refuses, gives the options to forward
/// with and a hook that sees how the call ended, or leaves that decision to a task when it has to wait (such as for
/// a token check). When no connection is ready on the loop, or a failure may be retried
/// (``ForwardedResponseReceiver/receiveEnd(_:retryable:)``), the call continues in a task as ``ForwardingService``
/// runs it, without `decide` again.
public struct EventLoopUnaryForwarder: UnaryCallForwarder {
    public enum Decision: Sendable {
        /// Leave the call to the method's general path; nothing may have been done for it.
        case decline
        /// End the call with this error.
        case refuse(any Error)
        /// Forward the call with these options; `ended` gets how it ended and returns what the client is told.
        case forward(CallOptions, ended: Ended)
        /// Continue the call in a task, where `decide` refuses or forwards it (it must not decline: the call is
        /// taken).
        case decideInTask(_ decide: @Sendable () async -> Decision)

        public typealias Ended = @Sendable (Result<Void, any Error>) -> Result<Void, any Error>
    }

    public let method: MethodSchema
    public let channel: RPCChannel
    private let decide: @Sendable (ServerContext) -> Decision

    public init(method: MethodSchema, channel: RPCChannel, decide: @escaping @Sendable (ServerContext) -> Decision) {
        self.method = method
        self.channel = channel
        self.decide = decide
    }

    public func forward(_ request: ReceivedMessage, context: ServerContext, responder: any ForwardedCallResponder) -> Bool {
        switch decide(context) {
        case .decline:
            return false
        case .refuse(let error):
            responder.finish(.failure(error))
            return true
        case .forward(let options, let ended):
            let call = ForwardedUnaryCall(
                method: method, request: request.payload, options: options, context: context, channel: channel,
                responder: responder, ended: ended)
            if let backend = channel.forwardOnCurrentEventLoop(
                method.descriptor, options: options, request: request.payload, to: call)
            {
                responder.onCancel { backend.cancel() }
            } else {
                call.continueInTask()
            }
            return true
        case .decideInTask(let decide):
            relayInTask(request.payload, context: context, responder: responder, method: method, channel: channel, decide)
            return true
        }
    }
}

/// The rest of a call as the general path runs it, in a task: `decide`, then a client call that connects, waits and
/// retries as the channel's policy allows.
private func relayInTask(
    _ request: ByteBuffer, context: ServerContext, responder: any ForwardedCallResponder, method: MethodSchema,
    channel: RPCChannel, _ decide: @escaping @Sendable () async -> EventLoopUnaryForwarder.Decision
) {
    responder.continueInTask { incoming in
        let (options, ended): (CallOptions, EventLoopUnaryForwarder.Decision.Ended)
        switch await decide() {
        case .refuse(let error):
            throw error
        case .forward(let forwardOptions, let forwardEnded):
            (options, ended) = (forwardOptions, forwardEnded)
        case .decline, .decideInTask:
            assertionFailure("a call continued in a task is refused or forwarded")
            throw RPCError(.internal, "the proxy could not decide how to forward the call")
        }
        let outcome: Result<Void, any Error>
        do {
            try await ForwardingService.relay(
                method, request: request, options: options, over: channel.bypassingInterceptors, to: incoming,
                context: context)
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        try ended(outcome).get()
    }
}

/// One call on the fast path: the backend's response relayed to the client as it arrives (on the event loop), or
/// the call handed to a task when that is the way on.
private final class ForwardedUnaryCall: ForwardedResponseReceiver {
    let method: MethodSchema
    let request: ByteBuffer
    let options: CallOptions
    let context: ServerContext
    let channel: RPCChannel
    let responder: any ForwardedCallResponder
    let ended: EventLoopUnaryForwarder.Decision.Ended

    init(
        method: MethodSchema, request: ByteBuffer, options: CallOptions, context: ServerContext, channel: RPCChannel,
        responder: any ForwardedCallResponder, ended: @escaping EventLoopUnaryForwarder.Decision.Ended
    ) {
        self.method = method
        self.request = request
        self.options = options
        self.context = context
        self.channel = channel
        self.responder = responder
        self.ended = ended
    }

    func receiveHeaders(_ metadata: Metadata) {
        context.addInitialMetadata(metadata.removingHopByHopFields())
    }

    func receiveMessage(_ message: ReceivedMessage) {
        responder.sendResponse(message.payload, compressed: message.wasCompressed || context.compressResponses)
    }

    func receiveEnd(_ outcome: Result<Metadata, RPCError>, retryable: Bool) {
        switch outcome {
        case .success(let trailers):
            context.addTrailers(trailers.removingHopByHopFields())
            responder.finish(ended(.success(())))
        case .failure where retryable:
            continueInTask()
        case .failure(var error):
            error.trailers = error.trailers.removingHopByHopFields()
            responder.finish(ended(.failure(error)))
        }
    }

    /// The rest of the call in a task (no connection was ready on the loop, or the failure may be retried).
    func continueInTask() {
        let decision = EventLoopUnaryForwarder.Decision.forward(options, ended: ended)
        relayInTask(request, context: context, responder: responder, method: method, channel: channel) { decision }
    }
}
