internal import HabitFlowBase64
internal import HabitFlowCompression
internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowRPCWeb
internal import HabitFlowTLS
internal import Logging
internal import NIOCore
internal import SwiftProtobuf

/// Serves gRPC on one connection: drives an nghttp2 server session with the bytes the channel reads, turns streams
/// into calls, runs their handlers, and writes everything the session wants to send, batched per event-loop tick.
///
/// Lives on the channel's event loop; handler tasks reach it through `NIOLoopBound`.
final class ServerConnectionHandler: ChannelInboundHandler, ServerCallConnection {
    // The class is split by responsibility: channel events and the start of calls here, responses and call ends in
    // `ServerConnectionHandler+Responses.swift`, output, timers and shutdown in `ServerConnectionHandler+Connection.swift`.

    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Asks every connection to finish its calls and close (sent by ``RPCServer/shutdown()``).
    struct GracefulShutdownEvent: Sendable {}

    /// The server's router, configuration and logger, shared with its other connections.
    private let environment: ServerConnectionEnvironment
    /// The server's logger with the connection's peer (``logger``), made on first use: most connections never log,
    /// and the metadata would take memory on every idle one.
    private var peerLogger: Logger?
    let taskExecutor: (any TaskExecutor)?

    /// The channel's event loop, where this handler lives.
    let eventLoop: any EventLoop
    var session: HTTP2Session?
    /// From `handlerAdded` to `handlerRemoved` only: the context holds this handler, so keeping it longer would keep
    /// both, and everything the handler holds, alive after the connection closed.
    var context: ChannelHandlerContext?
    var streams: [Int32: ServerStream] = [:]
    /// Calls opened in the current batch of events, whose handlers start when the batch is done.
    var pendingHandlerStarts: [(ServerStream, ServerMethod)] = []
    var peer = "unknown"

    /// Output waits for the TLS handshake (and an ALPN check) when TLS is on.
    var output: HTTP2ConnectionOutput

    /// The connection's lifecycle: phases, idle and age limits, keepalive, ping strikes, header timeout.
    var state: ConnectionStateMachine
    var timers = ConnectionTimers()

    init(environment: ServerConnectionEnvironment, eventLoop: any EventLoop) {
        let configuration = environment.configuration
        self.environment = environment
        self.eventLoop = eventLoop
        self.output = HTTP2ConnectionOutput(enabled: configuration.tls == nil)
        self.taskExecutor = configuration.handlerExecution.taskExecutor(on: eventLoop)
        self.state = ConnectionStateMachine(role: .server, configuration: configuration.connectionLifecycle, now: .now())
    }

    var router: RPCRouter { environment.router }
    var configuration: RPCServerConfiguration { environment.configuration }

    var logger: Logger {
        if let peerLogger { return peerLogger }
        var made = environment.logger
        made[metadataKey: "peer"] = "\(peer)"
        peerLogger = made
        return made
    }

    var loopBound: NIOLoopBound<ServerConnectionHandler> {
        NIOLoopBound(self, eventLoop: eventLoop)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func start(context: ChannelHandlerContext) {
        guard session == nil else { return }
        if let address = context.channel.remoteAddress { peer = Self.describe(address) }
        do {
            session = try HTTP2Session(role: .server, configuration: configuration.http2)
        } catch {
            logger.error("could not create an HTTP/2 session", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        let now = NIODeadline.now()
        state = ConnectionStateMachine(role: .server, configuration: configuration.connectionLifecycle, now: now)
        perform(state.start(now: now))
        flushOutput()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session else { return }
        let bytes = unwrapInboundIn(data)
        readStarted(bytes)
        do {
            let events = try session.receive(bytes)
            handle(events)
        } catch {
            handle(error.events)
            if error.isBadClientMagic {
                logger.debug("not an HTTP/2 client (bad connection preface); closing")
            } else if error.isFlood {
                // nghttp2 gives up on a flood (more SETTINGS or PING ACKs pending than it keeps) without a GOAWAY.
                logger.info("client flooded the connection; GOAWAY ENHANCE_YOUR_CALM")
                session.submitGoaway(errorCode: .enhanceYourCalm, debugData: "flood")
            } else {
                logger.info("HTTP/2 protocol error; closing", metadata: ["error": "\(error)"])
            }
            closeAfterFlushing()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readBurstEnded()
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
            output.enabled = true
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
        connectionClosed()
        for (_, stream) in streams { stream.abandon(error: CancellationError()) }
        streams.removeAll()
        session?.close()
        session = nil
        context.fireChannelInactive()
    }

    // MARK: HTTP/2 events

    func handle(_ events: [HTTP2Event]) {
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
                    streamClosed()
                }
            case .streamClosed(let streamID, _):
                if let stream = streams.removeValue(forKey: streamID) {
                    if stream.task != nil || !stream.statusSent { stream.abandon(error: CancellationError()) }
                    streamClosed()
                }
            case .ping(acknowledgement: false):
                let actions = state.pingReceived(now: .now())
                if !actions.isEmpty {
                    perform(actions)  // too many pings: GOAWAY and close, the rest of the events unread
                    return
                }
            case .ping(acknowledgement: true):
                perform(state.pingAcknowledged(now: .now()))
            case .streamFrameSent:
                state.streamFrameSent()
            case .goaway(_, let errorCode):
                logger.debug("client sent GOAWAY", metadata: ["code": "\(errorCode)"])
            case .settings, .goawaySent:
                break
            }
        }
        startPendingHandlers()
    }

    // MARK: Calls

    func startCall(streamID: Int32, fields: [HTTP2HeaderField], endStream: Bool) {
        guard context != nil else { return }
        let head = ServerRequestHead(fields)

        guard head.method == "POST", head.hasGRPCContentType else {
            // Web protocols (when on) are told apart by method and content type; anything else is refused as before.
            if let web = configuration.web, startWebCall(streamID: streamID, head: head, web: web, endStream: endStream) {
                return
            }
            guard head.method == "POST" else {
                return rejectRequest(
                    streamID, httpStatus: "405", RPCError(.internal, "gRPC requires POST, got \(head.method ?? "none")"))
            }
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

        openCall(
            streamID: streamID, method: method, metadata: head.metadata, timeout: timeout, deadline: deadline,
            requestEncoding: requestEncoding, acceptsGzip: head.acceptsGzip, web: nil, endStream: endStream)
    }

    /// Opens a call whose request head was accepted (native or web) and queues its handler's start.
    func openCall(
        streamID: Int32, method: ServerMethod, metadata: Metadata, timeout: Duration?,
        deadline: ContinuousClock.Instant?, requestEncoding: MessageEncoding?, acceptsGzip: Bool, web: WebCallCodec?,
        endStream: Bool
    ) {
        let callContext = ServerContext(
            method: method.descriptor, requestMetadata: metadata, deadline: deadline, peer: peer)
        let transport = ServerStreamTransport(
            streamID: streamID, connection: loopBound,
            requestQueueHighWatermark: configuration.requestQueueHighWatermark)
        let stream = ServerStream(
            streamID: streamID, context: callContext, transport: transport, requestEncoding: requestEncoding,
            acceptsGzip: acceptsGzip, maxReceiveMessageSize: configuration.maxReceiveMessageSize)
        stream.web = web
        streams[streamID] = stream
        streamOpened()
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
    func startPendingHandlers() {
        guard !pendingHandlerStarts.isEmpty else { return }
        let starts = pendingHandlerStarts
        pendingHandlerStarts.removeAll(keepingCapacity: true)
        for (stream, method) in starts where streams[stream.streamID] === stream && !stream.statusSent {
            // Web calls too: the forwarder answers through `sendResponse` and `handlerFinished`, which write a web
            // call's response with its codec (a Connect JSON request was turned into protobuf when its body ended).
            if let forwarder = router.unaryForwarders[method.descriptor.path],
                let request = stream.transport.takeOnlyRequest()
            {
                let responder = EventLoopCallResponder(connection: loopBound, streamID: stream.streamID)
                if forwarder.forward(request, context: stream.context, responder: responder) { continue }
                _ = stream.transport.deliver(request)
            }
            startHandler(stream, run: method.run, interceptors: router.interceptors)
        }
    }

    func startHandler(
        _ stream: ServerStream,
        run: @escaping @Sendable (ServerContext, any ServerCallTransport) async throws -> Void,
        interceptors: [any ServerInterceptor]
    ) {
        let task = startCallHandler(
            on: loopBound, streamID: stream.streamID, context: stream.context, transport: stream.transport, run: run,
            interceptors: interceptors, executor: taskExecutor)
        if !stream.handlerFinished { stream.task = task }
    }

    /// Answers a request that never reaches a handler with a Trailers-Only response.
    func rejectRequest(_ streamID: Int32, httpStatus: String, _ error: RPCError) {
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

    func receiveData(_ bytes: ByteBuffer, streamID: Int32) {
        guard let session else { return }
        guard let stream = streams[streamID], !stream.statusSent else {
            // Data for a call that already ended: give the window back and drop it.
            session.consume(bytes.readableBytes, streamID: streamID)
            return
        }
        if stream.web != nil { return receiveWebData(bytes, stream: stream) }
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

    func endOfRequests(_ stream: ServerStream) {
        guard !stream.requestsEnded else { return }
        stream.requestsEnded = true
        if stream.web != nil { return endWebBody(of: stream) }
        guard stream.deframer.isAtMessageBoundary else {
            return failCall(stream, RPCError(.internal, "the request stream ended inside a message (truncated message)"))
        }
        stream.transport.finishRequests()
    }

    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: "ipv4:\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: "ipv6:[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: "unix:\(address.pathname ?? "")"
        }
    }
}
