internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowRPCWeb
internal import Logging
internal import NIOCore
internal import NIOHTTP1

/// Serves web calls (gRPC-Web, Connect unary, CORS preflights) over HTTP/1.1, which browsers use for plaintext
/// `http://localhost`: each request becomes a call through the same router and interceptors as on HTTP/2, written by
/// the same ``WebCallCodec``.
///
/// One request at a time (keep-alive; NIO's pipelining assistance holds a pipelined request back until the previous
/// response ended). Streamed responses go out chunked, and a writer waits while the channel is not writable.
final class HTTP1WebConnectionHandler: ChannelInboundHandler, WebCallConnection {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let router: RPCRouter
    let configuration: RPCServerConfiguration
    let web: WebConfiguration
    var logger: Logger
    let taskExecutor: (any TaskExecutor)?
    let eventLoop: any EventLoop
    var context: ChannelHandlerContext?
    var peer = "unknown"

    /// The current request's call (`nil` between requests and for requests answered without one).
    var call: ServerCall<HTTP1WebConnectionHandler>?
    /// The current call's method, until its handler starts (once its request is in, or at the end of the read).
    var pendingStart: ServerMethod?
    /// Numbers the calls of the connection, so a late write of an earlier call cannot reach a later one.
    var callCounter: Int32 = 0
    var keepAlive = true
    var responseVersion = HTTPVersion.http1_1
    var deadlineTimer: Scheduled<Void>?
    var shuttingDown = false
    /// Runs while the connection waits for a request head (slowloris, and idle keep-alive connections).
    var headTimer: Scheduled<Void>?
    /// Both halves of the current exchange are done: the request ended and its response was written.
    var requestEnded = true
    var responseEnded = true

    init(
        router: RPCRouter, configuration: RPCServerConfiguration, web: WebConfiguration, logger: Logger,
        eventLoop: any EventLoop
    ) {
        self.router = router
        self.configuration = configuration
        self.web = web
        self.logger = logger
        self.eventLoop = eventLoop
        self.taskExecutor = configuration.handlerExecution.taskExecutor(on: eventLoop)
    }

    private var loopBound: NIOLoopBound<HTTP1WebConnectionHandler> { NIOLoopBound(self, eventLoop: eventLoop) }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let address = context.channel.remoteAddress {
            peer = ServerConnectionHandler.describe(address)
            logger[metadataKey: "peer"] = "\(peer)"
        }
        armHeadTimer()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            headTimer?.cancel()
            headTimer = nil
            requestEnded = false
            responseEnded = false
            startRequest(head, allocator: context.channel.allocator)
        case .body(let bytes):
            guard let call, !call.statusSent, !call.requestsEnded else { return }
            receiveWebBody(bytes, of: call)
        case .end:
            requestEnded = true
            exchangeMayHaveEnded()
            guard let call, !call.requestsEnded else { return }
            call.requestsEnded = true
            guard !call.statusSent else { return }
            endWebBody(of: call)
            startPendingHandler()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        startPendingHandler()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let call, let waiter = call.responseWaiter {
            call.responseWaiter = nil
            waiter.resume()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ServerConnectionHandler.GracefulShutdownEvent, is IdleStateHandler.IdleStateEvent:
            // Shutting down, or idle for the idle timeout: close between requests, otherwise after this response.
            shuttingDown = true
            closeAfterCurrentResponse(context)
        case let event as ChannelEvent where event == .inputClosed:
            // The client will send nothing more (the server allows half-closure): answer what is in flight, close.
            closeAfterCurrentResponse(context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func closeAfterCurrentResponse(_ context: ChannelHandlerContext) {
        keepAlive = false
        if call == nil || call!.statusSent { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/1.1 connection error; closing", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadlineTimer?.cancel()
        headTimer?.cancel()
        call?.abandon(error: CancellationError())
        call = nil
        pendingStart = nil
        context.fireChannelInactive()
    }

    // MARK: Requests

    private func startRequest(_ head: HTTPRequestHead, allocator: ByteBufferAllocator) {
        call?.abandon(error: CancellationError())
        call = nil
        pendingStart = nil
        deadlineTimer?.cancel()
        callCounter &+= 1
        keepAlive = head.isKeepAlive && !shuttingDown
        responseVersion = head.version
        let requestHead = ServerRequestHead(Self.fields(of: head))
        let decision = WebRequestDecision.decide(
            requestHead, router: router, web: web, maxMessageSize: configuration.maxReceiveMessageSize,
            allocator: allocator)
        switch decision {
        case .notWeb:
            write([
                .head(status: 415, headers: [("content-type", "text/plain"), ("content-length", "\(Self.notWeb.count)")]),
                .body(ByteBuffer(string: Self.notWeb)), .end,
            ])
        case .preflight(let headers):
            write([.head(status: 204, headers: headers), .end])
        case .reject(let codec, let error):
            logger.debug("rejected web request", metadata: ["status": "\(error)"])
            write(codec.encoder.rejection(error))
        case .call(let method, let codec, let metadata, let timeout):
            // curl asks before sending a body over 1 KiB, and waits a second for the answer otherwise.
            if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }), let context {
                let interim = HTTPResponseHead(version: head.version, status: .continue)
                context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
            }
            let callContext = ServerContext(
                method: method.descriptor, requestMetadata: metadata, deadline: timeout.map { .now + $0 }, peer: peer)
            let transport = CallTransport(
                streamID: callCounter, connection: loopBound,
                requestQueueHighWatermark: configuration.requestQueueHighWatermark)
            let call = ServerCall(
                streamID: callCounter, context: callContext, transport: transport, requestEncoding: nil,
                acceptsGzip: false, maxReceiveMessageSize: configuration.maxReceiveMessageSize)
            call.web = codec
            self.call = call
            if let timeout {
                guard timeout > .zero else {
                    return failCall(call, RPCError(.deadlineExceeded, "deadline exceeded before the call started"))
                }
                let bound = loopBound
                let callID = callCounter
                deadlineTimer = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                    let handler = bound.value
                    guard let call = handler.call, call.streamID == callID else { return }
                    handler.failCall(call, RPCError(.deadlineExceeded, "deadline exceeded"))
                }
            }
            pendingStart = method
        }
    }

    /// Once request and response are both done, the next request's head must come within the header timeout.
    private func exchangeMayHaveEnded() {
        if requestEnded && responseEnded { armHeadTimer() }
    }

    /// The header timeout between requests: a whole head must arrive within it, so a client dripping a head
    /// (slowloris) is closed, and so is a keep-alive connection left idle that long (10 s by default; Node's and
    /// Apache's keep-alive timeouts are 5 s, and browsers open a new connection when an idle one was closed).
    private func armHeadTimer() {
        guard let timeout = configuration.connectionManagement.headerTimeout, let context else { return }
        headTimer?.cancel()
        let bound = loopBound
        headTimer = context.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            bound.value.context?.close(promise: nil)
        }
    }

    static let notWeb = "This port serves gRPC over HTTP/2; over HTTP/1.1 only gRPC-Web and Connect requests.\n"

    /// The request head as HTTP/2-style fields, so ``ServerRequestHead`` reads both versions the same way. Names are
    /// lower-cased as HTTP/2 requires; connection-level fields are HTTP/1.1's own, not the call's metadata.
    private static func fields(of head: HTTPRequestHead) -> [HTTP2HeaderField] {
        var fields = [
            HTTP2HeaderField(name: ":method", value: head.method.rawValue),
            HTTP2HeaderField(name: ":path", value: head.uri),
        ]
        fields.reserveCapacity(2 + head.headers.count)
        for (name, value) in head.headers {
            let lowered = name.lowercased()
            guard !connectionFields.contains(lowered) else { continue }
            fields.append(HTTP2HeaderField(name: lowered, value: value))
        }
        return fields
    }

    private static let connectionFields: Set<String> = [
        "host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "proxy-connection",
    ]

    /// Starts the current call's handler, once: after its request ended, or at the end of the read that brought
    /// its head (a handler then waits for the body like any other).
    private func startPendingHandler() {
        guard let method = pendingStart, let call, !call.statusSent else { return }
        pendingStart = nil
        let task = startCallHandler(
            on: loopBound, streamID: call.streamID, context: call.context, transport: call.transport, run: method.run,
            interceptors: router.interceptors, executor: taskExecutor)
        if !call.handlerFinished { call.task = task }
    }

    // MARK: Responses (ServerCallConnection)

    private func currentCall(_ streamID: Int32) -> ServerCall<HTTP1WebConnectionHandler>? {
        guard let call, call.streamID == streamID, !call.statusSent else { return nil }
        return call
    }

    func sendResponse(_ payload: ByteBuffer, compressed: Bool, streamID: Int32) -> SendOutcome {
        guard let call = currentCall(streamID) else { return .callEnded }
        let metadata = call.context.initialMetadata
        guard writeWebParts(call, { (encoder) throws(RPCError) in try encoder.message(payload, initialMetadata: metadata) })
        else {
            return .callEnded
        }
        return context?.channel.isWritable ?? false ? .queued : .queueFull
    }

    func sendInitialMetadata(streamID: Int32) -> Bool {
        guard let call = currentCall(streamID) else { return false }
        return writeWebParts(call) { $0.initialMetadata(call.context.initialMetadata) }
    }

    func waitForSendQueue(streamID: Int32, continuation: UnsafeContinuation<Void, any Error>) {
        guard let call = currentCall(streamID) else {
            return continuation.resume(throwing: RPCError(.cancelled, "the call has ended"))
        }
        if context?.channel.isWritable ?? false { return continuation.resume() }
        call.responseWaiter = continuation
    }

    func cancelResponseWaiter(streamID: Int32) {
        guard let call, call.streamID == streamID, let waiter = call.responseWaiter else { return }
        call.responseWaiter = nil
        waiter.resume(throwing: CancellationError())
    }

    func releaseRequestCredit(streamID: Int32) {
        // HTTP/1.1 has no flow-control window to reopen; NIO keeps reading.
    }

    func handlerFinished(streamID: Int32, outcome: Result<Void, any Error>) {
        guard let call, call.streamID == streamID else { return }
        call.task = nil
        call.handlerFinished = true
        guard !call.statusSent else { return }
        sendStatus(call, CallStatus(ending: outcome, method: call.context.method, logger: logger))
    }

    func failCall(_ call: ServerCall<HTTP1WebConnectionHandler>, _ error: RPCError) {
        guard !call.statusSent else { return }
        sendStatus(call, CallStatus(error))
        call.abandon(error: error)
    }

    private func sendStatus(_ call: ServerCall<HTTP1WebConnectionHandler>, _ status: CallStatus) {
        deadlineTimer?.cancel()
        deadlineTimer = nil
        writeWebStatus(call, status)
        if let waiter = call.responseWaiter {
            call.responseWaiter = nil
            waiter.resume(throwing: RPCError(.cancelled, "the call has ended"))
        }
    }

    func submitWebParts(_ parts: [WebResponsePart], of call: ServerCall<HTTP1WebConnectionHandler>) {
        write(parts)
    }

    /// HTTP/1.1 for the parts: a response head (chunked unless it has a content length), body chunks, the end;
    /// flushed at once. Without keep-alive the connection closes after the end.
    private func write(_ parts: [WebResponsePart]) {
        guard let context, !parts.isEmpty else { return }
        for part in parts {
            switch part {
            case .head(let status, let headers):
                var fields = HTTPHeaders(headers.map { ($0.name, $0.value) })
                if !keepAlive { fields.replaceOrAdd(name: "connection", value: "close") }
                let head = HTTPResponseHead(
                    version: responseVersion, status: HTTPResponseStatus(statusCode: status), headers: fields)
                context.write(wrapOutboundOut(.head(head)), promise: nil)
            case .body(let bytes):
                context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
            case .end:
                responseEnded = true
                exchangeMayHaveEnded()
                if keepAlive {
                    context.write(wrapOutboundOut(.end(nil)), promise: nil)
                } else {
                    let channel = context.channel
                    context.write(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
                }
            }
        }
        context.flush()
    }
}
