internal import HabitFlowBase64
internal import HabitFlowCompression
internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore
internal import SwiftProtobuf

/// Serves gRPC on one connection: drives an nghttp2 server session with the bytes the channel reads, turns streams
/// into calls, runs their handlers, and writes everything the session wants to send, batched per event-loop tick.
///
/// Lives on the channel's event loop; handler tasks reach it through `NIOLoopBound`.
final class ServerConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Asks every connection to finish its calls and close (sent by ``RPCServer/shutdown()``).
    struct GracefulShutdownEvent: Sendable {}

    private let router: RPCRouter
    private let configuration: RPCServerConfiguration
    private var logger: Logger
    private let taskExecutor: (any TaskExecutor)?

    private var session: HTTP2Session?
    private var context: ChannelHandlerContext?
    private var streams: [Int32: ServerStream] = [:]
    /// Calls opened in the current batch of events, whose handlers start when the batch is done.
    private var pendingHandlerStarts: [(ServerStream, ServerMethod)] = []
    private var peer = "unknown"

    /// Output waits for the TLS handshake (and an ALPN check) when TLS is on.
    private var outputEnabled: Bool
    /// What each flush drains the session into (``ReusableOutputBuffer``).
    private var outputBuffer = ReusableOutputBuffer(allocator: ByteBufferAllocator())
    private var inReadBurst = false
    private var flushScheduled = false

    private var keepalive = KeepalivePolicy()
    private var lastReadTime = NIODeadline.now()
    private var pingTimer: Scheduled<Void>?
    private var pingTimeoutTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    /// When the last call ended (or the connection opened): the idle timeout counts from here.
    private var idleSince = NIODeadline.now()
    private var ageTimer: Scheduled<Void>?
    private var deadlineTimer = ConnectionDeadlineTimer()

    private enum Phase {
        case active
        /// Shutdown notice sent; waiting one round trip before the final GOAWAY.
        case shutdownNoticeSent(Scheduled<Void>?)
        /// Final GOAWAY sent; closing when the last call ends or the grace period runs out.
        case draining(Scheduled<Void>?)
        case closed
    }

    private var phase = Phase.active
    private static let shutdownPingPayload: UInt64 = 0x6866_5F73_6875_7464  // "hf_shutd"
    private static let keepalivePingPayload: UInt64 = 0x6866_5F6B_6565_7061  // "hf_keepa"

    init(router: RPCRouter, configuration: RPCServerConfiguration, logger: Logger, eventLoop: any EventLoop) {
        self.router = router
        self.configuration = configuration
        self.logger = logger
        self.outputEnabled = configuration.tls == nil
        switch configuration.handlerExecution {
        case .eventLoop: self.taskExecutor = EventLoopTaskExecutor(eventLoop: eventLoop)
        case .globalConcurrentExecutor: self.taskExecutor = nil
        }
    }

    private var loopBound: NIOLoopBound<ServerConnectionHandler> {
        NIOLoopBound(self, eventLoop: context!.eventLoop)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard session == nil else { return }
        if let address = context.channel.remoteAddress {
            peer = Self.describe(address)
            logger[metadataKey: "peer"] = "\(peer)"
        }
        do {
            session = try HTTP2Session(role: .server, configuration: configuration.http2)
        } catch {
            logger.error("could not create an HTTP/2 session", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        armIdleTimer()
        armKeepalivePing()
        if let age = configuration.connectionManagement.maxConnectionAge {
            let bound = loopBound
            ageTimer = context.eventLoop.scheduleTask(in: TimeAmount(age)) { bound.value.beginGracefulShutdown() }
        }
        flushOutput()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session else { return }
        let bytes = unwrapInboundIn(data)
        inReadBurst = true
        lastReadTime = .now()
        do {
            let events = try session.receive(bytes)
            handle(events)
        } catch {
            handle(error.events)
            if error.isBadClientMagic {
                logger.debug("not an HTTP/2 client (bad connection preface); closing")
            } else {
                logger.info("HTTP/2 protocol error; closing", metadata: ["error": "\(error)"])
            }
            closeAfterFlushing()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inReadBurst = false
        flushOutput()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { flushOutput() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let handshake as TLSHandshakeCompleted:
            guard handshake.negotiatedProtocol == "h2" else {
                logger.info("TLS client did not negotiate ALPN h2; closing")
                context.close(promise: nil)
                return
            }
            outputEnabled = true
            flushOutput()
        case is GracefulShutdownEvent:
            beginGracefulShutdown()
        case let event as ChannelEvent where event == .inputClosed:
            // The client closed its side: nothing more will arrive, finish what we can and close.
            closeAfterFlushing()
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error; closing", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        phase = .closed
        for (_, stream) in streams { stream.abandon(error: CancellationError()) }
        streams.removeAll()
        for timer in [pingTimer, pingTimeoutTimer, idleTimer, ageTimer] { timer?.cancel() }
        deadlineTimer.cancel()
        session?.close()
        session = nil
        context.fireChannelInactive()
    }

    // MARK: HTTP/2 events

    private func handle(_ events: [HTTP2Event]) {
        for event in events {
            switch event {
            case .headers(let streamID, let fields, let endStream):
                if let stream = streams[streamID] {
                    // Trailers from the client: no meaning in gRPC beyond ending the request stream.
                    if endStream { endOfRequests(stream) }
                } else {
                    startCall(streamID: streamID, fields: fields, endStream: endStream)
                }
            case .data(let streamID, let bytes):
                receiveData(bytes, streamID: streamID)
            case .endOfStream(let streamID):
                if let stream = streams[streamID] { endOfRequests(stream) }
            case .streamReset(let streamID, let errorCode):
                if let stream = streams.removeValue(forKey: streamID) {
                    logger.debug("client reset stream", metadata: ["stream": "\(streamID)", "code": "\(errorCode)"])
                    stream.abandon(error: CancellationError())
                    streamsChanged()
                }
            case .streamClosed(let streamID, _):
                if let stream = streams.removeValue(forKey: streamID) {
                    if stream.task != nil || !stream.statusSent { stream.abandon(error: CancellationError()) }
                    streamsChanged()
                }
            case .ping(acknowledgement: false):
                if !keepalive.pingReceived(hasActiveCalls: !streams.isEmpty, policy: configuration.keepalive) {
                    logger.info("client pings too often; GOAWAY ENHANCE_YOUR_CALM")
                    session?.submitGoaway(errorCode: .enhanceYourCalm, debugData: "too_many_pings")
                    closeAfterFlushing()
                    return
                }
            case .ping(acknowledgement: true):
                pingAcknowledged()
            case .streamFrameSent:
                keepalive.dataOrHeadersSent()
            case .goaway(_, let errorCode):
                logger.debug("client sent GOAWAY", metadata: ["code": "\(errorCode)"])
            case .settings, .goawaySent:
                break
            }
        }
        startPendingHandlers()
    }

    // MARK: Calls

    private func startCall(streamID: Int32, fields: [HTTP2HeaderField], endStream: Bool) {
        guard context != nil else { return }
        let head = ServerRequestHead(fields)

        guard head.method == "POST" else {
            return rejectRequest(streamID, httpStatus: "405", RPCError(.internal, "gRPC requires POST, got \(head.method ?? "none")"))
        }
        guard head.hasGRPCContentType else {
            return rejectRequest(
                streamID, httpStatus: "415",
                RPCError(.internal, "invalid gRPC request content-type \"\(head.contentType ?? "")\""))
        }
        guard head.te == "trailers" else {
            return rejectRequest(streamID, httpStatus: "400", RPCError(.internal, "gRPC requires the header te: trailers"))
        }
        guard let path = head.path, let method = router.methods[path] else {
            return rejectRequest(streamID, httpStatus: "200", RPCError(.unimplemented, "Method not found: \(head.path ?? "")"))
        }
        var deadline: ContinuousClock.Instant?
        var timeout: Duration?
        if let value = head.timeout {
            guard let parsed = GRPCTimeout.parse(value) else {
                return rejectRequest(streamID, httpStatus: "200", RPCError(.internal, "malformed grpc-timeout \"\(value)\""))
            }
            timeout = parsed
            deadline = .now + parsed
        }
        var requestEncoding: MessageEncoding?
        if let encoding = head.encoding {
            guard let known = MessageEncoding(rawValue: encoding) else {
                return rejectRequest(
                    streamID, httpStatus: "200",
                    RPCError(.unimplemented, "grpc-encoding \"\(encoding)\" is not supported (supported: \(MessageEncoding.advertised))"))
            }
            requestEncoding = known == .identity ? nil : known
        }

        let callContext = ServerContext(
            method: method.descriptor, requestMetadata: head.metadata, deadline: deadline, peer: peer)
        let transport = ServerStreamTransport(
            streamID: streamID, connection: loopBound,
            requestQueueHighWatermark: configuration.requestQueueHighWatermark)
        let stream = ServerStream(
            streamID: streamID, context: callContext, transport: transport, requestEncoding: requestEncoding,
            acceptsGzip: head.acceptsGzip, maxReceiveMessageSize: configuration.maxReceiveMessageSize)
        streams[streamID] = stream
        streamsChanged()
        if endStream { endOfRequests(stream) }

        if let timeout {
            guard timeout > .zero else {
                return failCall(stream, RPCError(.deadlineExceeded, "deadline exceeded before the call started"))
            }
            let deadline = NIODeadline.now() + TimeAmount(timeout)
            stream.timerDeadline = deadline
            armDeadlineTimer(by: deadline)
        }

        pendingHandlerStarts.append((stream, method))
    }

    /// Starts the handlers of the calls opened by the events just handled. Deferred to the end of the batch so the
    /// request message and END_STREAM that arrived in the same read are already queued: a unary handler then finds
    /// its request at once and runs to completion without suspending.
    private func startPendingHandlers() {
        guard !pendingHandlerStarts.isEmpty else { return }
        let starts = pendingHandlerStarts
        pendingHandlerStarts.removeAll(keepingCapacity: true)
        for (stream, method) in starts where streams[stream.streamID] === stream && !stream.statusSent {
            if let forwarder = method.unaryForwarder, let request = stream.transport.takeOnlyRequest() {
                let responder = EventLoopCallResponder(connection: loopBound, streamID: stream.streamID)
                if forwarder.forward(request, context: stream.context, responder: responder) { continue }
                _ = stream.transport.deliver(request)
            }
            startHandler(stream, run: method.run, interceptors: router.interceptors)
        }
    }

    private func startHandler(
        _ stream: ServerStream,
        run: @escaping @Sendable (ServerContext, any ServerCallTransport) async throws -> Void,
        interceptors: [any ServerInterceptor]
    ) {
        let bound = loopBound
        let callContext = stream.context
        let transport = stream.transport
        let streamID = stream.streamID
        // `Task.immediate` runs the handler right here, on the event loop, until it first suspends: a call that
        // never waits (most unary calls once their request is in) completes within this read, with no hop and no
        // wake-up of another thread. After a suspension it resumes on the preferred executor (the event loop).
        let task = Task.immediate(executorPreference: taskExecutor) {
            let outcome: Result<Void, any Error>
            do {
                if interceptors.isEmpty {
                    try await run(callContext, transport)
                } else {
                    try await interceptors.run(context: callContext) { try await run(callContext, transport) }
                }
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            if bound.eventLoop.inEventLoop {
                bound.value.handlerFinished(streamID: streamID, outcome: outcome)
            } else {
                bound.eventLoop.execute { bound.value.handlerFinished(streamID: streamID, outcome: outcome) }
            }
        }
        if !stream.handlerFinished { stream.task = task }
    }

    /// Answers a request that never reaches a handler with a Trailers-Only response.
    private func rejectRequest(_ streamID: Int32, httpStatus: String, _ error: RPCError) {
        guard let session else { return }
        logger.debug("rejected request", metadata: ["stream": "\(streamID)", "status": "\(error)"])
        var fields = [
            HTTP2HeaderField(name: ":status", value: httpStatus),
            HTTP2HeaderField(name: "content-type", value: "application/grpc"),
        ]
        if error.code == .unimplemented {
            fields.append(.init(name: "grpc-accept-encoding", value: MessageEncoding.advertised))
        }
        fields += StatusTrailers.fields(error.code, message: error.message, details: error.details, trailers: error.trailers)
        try? session.submitResponse(fields, streamID: streamID, endStream: true)
        session.resetAfterEndOfStream(streamID)
        scheduleFlush()
    }

    private func receiveData(_ bytes: ByteBuffer, streamID: Int32) {
        guard let session else { return }
        guard let stream = streams[streamID], !stream.statusSent else {
            // Data for a call that already ended: give the window back and drop it.
            session.consume(bytes.readableBytes, streamID: streamID)
            return
        }
        stream.deframer.append(bytes)
        var queued = 0
        do {
            while let framed = try stream.deframer.next() {
                let payload: ByteBuffer
                if framed.compressed {
                    guard stream.requestEncoding == .gzip else {
                        throw RPCError(.internal, "received a compressed message without a grpc-encoding")
                    }
                    do {
                        payload = try Gzip.decompress(framed.payload, limit: configuration.maxReceiveMessageSize)
                    } catch .tooLarge(let limit) {
                        throw RPCError(
                            .resourceExhausted, "decompressed request message larger than the limit of \(limit) bytes")
                    } catch .corrupt(let reason) {
                        throw RPCError(.internal, "could not decompress the request message: \(reason)")
                    }
                } else {
                    payload = framed.payload
                }
                queued = stream.transport.deliver(ReceivedMessage(payload: payload, wasCompressed: framed.compressed))
            }
        } catch let failure as MessageDeframer.Failure {
            session.consume(bytes.readableBytes, streamID: streamID)
            switch failure {
            case .messageTooLarge(let length, let limit):
                return failCall(
                    stream,
                    RPCError(.resourceExhausted, "received message larger than max (\(length) vs. \(limit) bytes)"))
            case .invalidFlag(let flag):
                return failCall(stream, RPCError(.internal, "invalid compressed-flag byte \(flag) in message prefix"))
            }
        } catch let error as RPCError {
            session.consume(bytes.readableBytes, streamID: streamID)
            return failCall(stream, error)
        } catch {
            session.consume(bytes.readableBytes, streamID: streamID)
            return failCall(stream, RPCError(.internal, "could not read the request"))
        }
        // Back-pressure: stop returning flow-control credit while the handler has a backlog of whole messages.
        if queued >= configuration.requestQueueHighWatermark {
            stream.withheldBytes += bytes.readableBytes
            stream.transport.withholdCredit()
        } else {
            session.consume(bytes.readableBytes, streamID: streamID)
        }
    }

    private func endOfRequests(_ stream: ServerStream) {
        guard !stream.requestsEnded else { return }
        stream.requestsEnded = true
        guard stream.deframer.isAtMessageBoundary else {
            return failCall(stream, RPCError(.internal, "the request stream ended inside a message (truncated message)"))
        }
        stream.transport.finishRequests()
    }

    /// The handler pulled enough messages: return the flow-control credit held back.
    func releaseRequestCredit(streamID: Int32) {
        guard let stream = streams[streamID], stream.withheldBytes > 0 else { return }
        session?.consume(stream.withheldBytes, streamID: streamID)
        stream.withheldBytes = 0
        scheduleFlush()
    }

    enum SendOutcome {
        case queued
        /// Queued, but the stream's send queue is above the high watermark: the writer should wait.
        case queueFull
        case callEnded
    }

    /// Queues one response message (sending the response headers first if needed).
    func sendResponse(_ payload: ByteBuffer, compressed: Bool, streamID: Int32) -> SendOutcome {
        guard let session, let context, let stream = streams[streamID], !stream.statusSent else { return .callEnded }
        if !stream.headersSent { sendResponseHeaders(stream, wantsCompression: compressed) }
        let compress = compressed && stream.responseEncoding == .gzip
        let body = compress ? Gzip.compress(payload) : payload
        session.writeData(framedMessage(body, compressed: compress, allocator: context.channel.allocator), streamID: streamID)
        scheduleFlush()
        return session.queuedOutboundBytes(streamID: streamID) > configuration.responseQueueHighWatermark
            ? .queueFull : .queued
    }

    /// Sends the response headers of a call now, unless they went out already; false once the call has ended.
    func sendInitialMetadata(streamID: Int32) -> Bool {
        guard session != nil, let stream = streams[streamID], !stream.statusSent else { return false }
        if !stream.headersSent {
            // Announces gzip when the client takes it: each later message is then compressed or not on its own.
            sendResponseHeaders(stream, wantsCompression: true)
            scheduleFlush()
        }
        return true
    }

    /// Parks a writer until its stream's send queue drains below the low watermark (or the call ends).
    func waitForSendQueue(streamID: Int32, continuation: UnsafeContinuation<Void, any Error>) {
        guard let stream = streams[streamID], !stream.statusSent else {
            continuation.resume(throwing: RPCError(.cancelled, "the call has ended"))
            return
        }
        stream.responseWaiter = continuation
    }

    func cancelResponseWaiter(streamID: Int32) {
        guard let stream = streams[streamID], let waiter = stream.responseWaiter else { return }
        stream.responseWaiter = nil
        waiter.resume(throwing: CancellationError())
    }

    private func sendResponseHeaders(_ stream: ServerStream, wantsCompression: Bool) {
        guard let session else { return }
        stream.headersSent = true
        // One allocation for the whole block: appending past an array literal's size grew it once more per call.
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(4 + stream.context.initialMetadata.count)
        fields.append(HTTP2HeaderField(name: ":status", value: "200"))
        fields.append(HTTP2HeaderField(name: "content-type", value: "application/grpc"))
        fields.append(HTTP2HeaderField(name: "grpc-accept-encoding", value: MessageEncoding.advertised))
        if stream.acceptsGzip && (wantsCompression || stream.context.compressResponses) {
            stream.responseEncoding = .gzip
            fields.append(.init(name: "grpc-encoding", value: "gzip"))
        }
        stream.context.initialMetadata.forEachHeaderField { fields.append(.init(name: $0, value: $1, neverIndexed: $2)) }
        do {
            try session.submitResponse(fields, streamID: stream.streamID, endStream: false)
        } catch {
            logger.error("could not submit response headers", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Calls taken by a UnaryCallForwarder (through EventLoopCallResponder)

    func onForwardedCallCancelled(streamID: Int32, _ cancel: @escaping @Sendable () -> Void) {
        guard let stream = streams[streamID], !stream.statusSent else { return cancel() }
        stream.cancelForwarding = cancel
    }

    func continueForwardedCallInTask(
        streamID: Int32, _ handler: @escaping @Sendable (any ServerCallTransport) async throws -> Void
    ) {
        guard let stream = streams[streamID], !stream.statusSent else { return }
        stream.cancelForwarding = nil
        startHandler(stream, run: { _, transport in try await handler(transport) }, interceptors: [])
    }

    func handlerFinished(streamID: Int32, outcome: Result<Void, any Error>) {
        guard let stream = streams[streamID] else { return }
        stream.task = nil
        stream.cancelForwarding = nil
        stream.handlerFinished = true
        guard !stream.statusSent else { return }
        switch outcome {
        case .success:
            sendStatus(stream, code: RPCStatusCode.ok, message: "", details: [], extraTrailers: Metadata())
        case .failure(let error as RPCError):
            sendStatus(
                stream, code: error.code, message: error.message, details: error.details,
                encodedDetails: error.receivedStatusDetails, extraTrailers: error.trailers)
        case .failure(is CancellationError):
            sendStatus(stream, code: RPCStatusCode.cancelled, message: "the call was cancelled", details: [], extraTrailers: Metadata())
        case .failure(let error):
            // Other errors may carry internals (SQL, paths): log them, tell the client only that it failed.
            logger.error(
                "handler failed", metadata: ["method": "\(stream.context.method)", "error": "\(String(reflecting: error))"])
            sendStatus(stream, code: RPCStatusCode.unknown, message: "the handler failed with an unexpected error", details: [], extraTrailers: Metadata())
        }
    }

    private func armDeadlineTimer(by deadline: NIODeadline) {
        guard let context else { return }
        let bound = loopBound
        deadlineTimer.fire(by: deadline, on: context.eventLoop) { bound.value.deadlineTimerFired() }
    }

    /// Ends the calls past their deadline, then waits for the earliest deadline left.
    private func deadlineTimerFired() {
        deadlineTimer.fired()
        let (expired, next) = ConnectionDeadlineTimer.sweep(streams.values) { $0.statusSent ? nil : $0.timerDeadline }
        for stream in expired { failCall(stream, RPCError(.deadlineExceeded, "deadline exceeded")) }
        if let next { armDeadlineTimer(by: next) }
    }

    /// Ends a call from the runtime's side: status out, handler cancelled, the client told to stop sending.
    private func failCall(_ stream: ServerStream, _ error: RPCError) {
        guard !stream.statusSent else { return }
        sendStatus(
            stream, code: error.code, message: error.message, details: error.details,
            encodedDetails: error.receivedStatusDetails, extraTrailers: error.trailers)
        stream.abandon(error: error)
    }

    private func sendStatus(
        _ stream: ServerStream, code: RPCStatusCode, message: String, details: [Google_Protobuf_Any],
        encodedDetails: [UInt8]? = nil, extraTrailers: Metadata
    ) {
        guard let session else { return }
        stream.statusSent = true
        var trailers = stream.context.trailers
        trailers.add(contentsOf: extraTrailers)
        let status = StatusTrailers.fields(
            code, message: message, details: details, encodedDetails: encodedDetails, trailers: trailers)
        if stream.headersSent {
            session.finishStream(stream.streamID, trailers: status)
        } else {
            // Trailers-Only: one HEADERS frame with END_STREAM.
            var fields = [
                HTTP2HeaderField(name: ":status", value: "200"),
                HTTP2HeaderField(name: "content-type", value: "application/grpc"),
            ]
            stream.context.initialMetadata.forEachHeaderField { fields.append(.init(name: $0, value: $1, neverIndexed: $2)) }
            try? session.submitResponse(fields + status, streamID: stream.streamID, endStream: true)
        }
        session.resetAfterEndOfStream(stream.streamID)
        if let waiter = stream.responseWaiter {
            stream.responseWaiter = nil
            waiter.resume(throwing: RPCError(.cancelled, "the call has ended"))
        }
        scheduleFlush()
    }

    // MARK: Output

    private func scheduleFlush() {
        guard !inReadBurst, !flushScheduled, let context else { return }
        flushScheduled = true
        let bound = loopBound
        context.eventLoop.execute {
            let handler = bound.value
            handler.flushScheduled = false
            handler.flushOutput()
        }
    }

    /// Writes everything the session has to send in one buffer and one flush.
    private func flushOutput() {
        guard outputEnabled, let session, let context, context.channel.isWritable else { return }
        var buffer = outputBuffer.take()
        for _ in 0..<8 {
            do {
                let events = try session.drainOutput(into: &buffer)
                guard !events.isEmpty else { break }
                handle(events)
            } catch {
                logger.info("HTTP/2 session failed while sending; closing", metadata: ["error": "\(error)"])
                phase = .closed
                break
            }
            if !session.wantsWrite { break }
        }
        outputBuffer.keep(buffer)
        if buffer.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
        resumeResponseWriters()
        if case .closed = phase {
            context.close(promise: nil)
        } else if !session.wantsReadOrWrite {
            context.close(promise: nil)
        }
    }

    private func resumeResponseWriters() {
        guard let session else { return }
        let lowWatermark = configuration.responseQueueHighWatermark / 2
        for (streamID, stream) in streams {
            guard let waiter = stream.responseWaiter,
                session.queuedOutboundBytes(streamID: streamID) <= lowWatermark
            else { continue }
            stream.responseWaiter = nil
            waiter.resume()
        }
    }

    private func closeAfterFlushing() {
        phase = .closed
        if inReadBurst { return }  // channelReadComplete flushes and closes
        flushOutput()
        if outputEnabled == false { context?.close(promise: nil) }
    }

    // MARK: Connection management

    private func streamsChanged() {
        if streams.isEmpty {
            if case .draining = phase {
                phase = .closed
                scheduleFlush()
                if inReadBurst == false, flushScheduled == false { context?.close(promise: nil) }
                return
            }
            idleSince = .now()
        }
    }

    /// One timer per connection, re-armed only when it fires: calls starting and ending at high rates then cost no
    /// timer work, only a timestamp.
    private func armIdleTimer(after delay: TimeAmount? = nil) {
        guard let idleTimeout = configuration.connectionManagement.idleTimeout, let context else { return }
        let bound = loopBound
        idleTimer = context.eventLoop.scheduleTask(in: delay ?? TimeAmount(idleTimeout)) {
            bound.value.idleTimerFired()
        }
    }

    private func idleTimerFired() {
        guard let idleTimeout = configuration.connectionManagement.idleTimeout else { return }
        let idleFor = NIODeadline.now() - idleSince
        if streams.isEmpty && idleFor >= TimeAmount(idleTimeout) {
            logger.debug("connection idle; closing")
            beginGracefulShutdown()
        } else {
            armIdleTimer(after: streams.isEmpty ? TimeAmount(idleTimeout) - idleFor : TimeAmount(idleTimeout))
        }
    }

    private func armKeepalivePing() {
        guard let interval = configuration.keepalive.pingInterval, let context else { return }
        let bound = loopBound
        pingTimer = context.eventLoop.scheduleTask(in: TimeAmount(interval)) {
            let handler = bound.value
            if NIODeadline.now() - handler.lastReadTime >= TimeAmount(interval) {
                handler.sendKeepalivePing()
            }
            handler.armKeepalivePing()
        }
    }

    private func sendKeepalivePing() {
        guard let context, pingTimeoutTimer == nil else { return }
        session?.ping(Self.keepalivePingPayload)
        let bound = loopBound
        pingTimeoutTimer = context.eventLoop.scheduleTask(in: TimeAmount(configuration.keepalive.pingTimeout)) {
            let handler = bound.value
            handler.logger.info("keepalive ping not answered; closing")
            handler.context?.close(promise: nil)
        }
        scheduleFlush()
    }

    private func pingAcknowledged() {
        pingTimeoutTimer?.cancel()
        pingTimeoutTimer = nil
        if case .shutdownNoticeSent(let timer) = phase {
            timer?.cancel()
            sendFinalGoaway()
        }
    }

    /// Graceful shutdown: GOAWAY(2^31-1) at once, the real GOAWAY one round trip later, close when calls finish
    /// or the grace period ends.
    func beginGracefulShutdown() {
        guard case .active = phase, let session, let context else { return }
        session.submitShutdownNotice()
        session.ping(Self.shutdownPingPayload)
        let bound = loopBound
        let fallback = context.eventLoop.scheduleTask(in: .seconds(1)) { bound.value.sendFinalGoaway() }
        phase = .shutdownNoticeSent(fallback)
        scheduleFlush()
    }

    private func sendFinalGoaway() {
        guard case .shutdownNoticeSent = phase, let session, let context else { return }
        session.submitGoaway(errorCode: .noError)
        let bound = loopBound
        let grace = context.eventLoop.scheduleTask(in: TimeAmount(configuration.connectionManagement.gracePeriod)) {
            let handler = bound.value
            handler.logger.info("grace period over; cancelling the remaining calls", metadata: ["calls": "\(handler.streams.count)"])
            for (streamID, stream) in handler.streams {
                handler.session?.resetStream(streamID, errorCode: .cancel)
                stream.abandon(error: CancellationError())
            }
            handler.streams.removeAll()
            handler.phase = .closed
            handler.flushOutput()
        }
        phase = .draining(grace)
        if streams.isEmpty { phase = .closed }
        scheduleFlush()
    }

    private static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: "ipv4:\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: "ipv6:[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: "unix:\(address.pathname ?? "")"
        }
    }
}
