internal import HabitFlowCompression
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore

/// Carries calls over one connection: drives an nghttp2 client session with the bytes the channel reads, opens a
/// stream per call attempt, and writes everything the session wants to send, batched per event-loop tick.
///
/// Lives on the channel's event loop; calls reach it through `NIOLoopBound` (see ``ClientStreamTransport``).
final class ClientConnectionHandler: ChannelInboundHandler, HTTP2ConnectionShell {
    // Split by responsibility: channel and HTTP/2 events here, the calls' side (opening streams, sending, cancelling)
    // in `ClientConnectionHandler+Calls.swift`; output and lifecycle come from `HTTP2ConnectionShell`.

    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let configuration: RPCChannelConfiguration
    let target: RPCChannelConfiguration.Target
    let authority: String
    let scheme: String
    let logger: Logger
    let readyPromise: EventLoopPromise<Void>
    let connectionState: ClientConnectionState
    let keepaliveInterval: KeepaliveInterval

    var session: HTTP2Session?
    /// From `handlerAdded` to `handlerRemoved` only: the context holds this handler, so keeping it longer would keep
    /// both, and everything the handler holds, alive after the connection closed.
    var context: ChannelHandlerContext?
    var streams: [Int32: ClientStream] = [:]

    /// Output waits for the TLS handshake (and the ALPN check) when TLS is on.
    var output: HTTP2ConnectionOutput
    /// The connection's lifecycle: ready at the server's first SETTINGS, draining after its GOAWAY, keepalive.
    var state: ConnectionStateMachine
    var timers = ConnectionTimers()

    init(
        configuration: RPCChannelConfiguration, target: RPCChannelConfiguration.Target, logger: Logger,
        readyPromise: EventLoopPromise<Void>, connectionState: ClientConnectionState,
        keepaliveInterval: KeepaliveInterval
    ) {
        self.configuration = configuration
        self.target = target
        self.authority = configuration.authority ?? target.description
        self.scheme = configuration.tls == nil ? "http" : "https"
        self.logger = logger
        self.readyPromise = readyPromise
        self.connectionState = connectionState
        self.keepaliveInterval = keepaliveInterval
        self.output = HTTP2ConnectionOutput(enabled: configuration.tls == nil)
        self.state = ConnectionStateMachine(
            role: .client,
            configuration: .init(
                keepalive: configuration.keepalive.map {
                    .init(
                        interval: TimeAmount(keepaliveInterval.current), timeout: TimeAmount($0.timeout),
                        withoutCalls: $0.permitWithoutCalls)
                }),
            now: .now())
    }

    var loopBound: NIOLoopBound<ClientConnectionHandler> {
        NIOLoopBound(self, eventLoop: context!.eventLoop)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        // A connection that never became active (refused, timed out) gets no channelInactive.
        readyPromise.fail(configuration.unavailable("\(target) closed the connection before HTTP/2 was set up"))
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func start(context: ChannelHandlerContext) {
        guard session == nil else { return }
        do {
            session = try HTTP2Session(role: .client, configuration: configuration.http2)
        } catch {
            readyPromise.fail(RPCError(.internal, "could not set up HTTP/2", cause: error))
            context.close(promise: nil)
            return
        }
        perform(state.start(now: .now()))
        flushOutput()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session else { return }
        let bytes = unwrapInboundIn(data)
        readStarted(bytes)
        do {
            handle(try session.receive(bytes))
        } catch {
            handle(error.events)
            logger.info("HTTP/2 protocol error from the server; closing", metadata: ["error": "\(error)"])
            state.close()
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
        if let handshake = event as? TLSHandshakeCompleted {
            guard handshake.negotiatedProtocol == "h2" else {
                readyPromise.fail(configuration.unavailable("\(target) did not negotiate ALPN h2"))
                context.close(promise: nil)
                return
            }
            output.enabled = true
            flushOutput()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error; closing", metadata: ["error": "\(error)"])
        readyPromise.fail(configuration.unavailable("the connection to \(target) failed: \(error)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connectionClosed()
        connectionState.markClosed()
        readyPromise.fail(configuration.unavailable("\(target) closed the connection before HTTP/2 was set up"))
        for (_, stream) in streams where !stream.ended {
            stream.ended = true
            stream.transport.fail(RPCError(.unavailable, "the connection to the server was lost"))
            stream.sendWaiter?.resume(throwing: RPCError(.unavailable, "the connection to the server was lost"))
            stream.sendWaiter = nil
        }
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
                if let stream = streams[streamID] { receiveHeaders(fields, endStream: endStream, stream: stream) }
            case .data(let streamID, let bytes):
                receiveData(bytes, streamID: streamID)
            case .endOfStream(let streamID):
                // END_STREAM on DATA: the server ended without trailers.
                if let stream = streams[streamID], !stream.ended {
                    end(stream, .failed(RPCError(.internal, "the response ended without trailers"), processed: true))
                }
            case .streamReset(let streamID, let errorCode):
                if let stream = streams[streamID], !stream.ended {
                    stream.ended = true
                    let (error, processed) = Self.error(forReset: errorCode, deadline: stream.transport.request.deadline)
                    stream.transport.fail(error, processed: processed)
                    stream.failSendWaiter(error)
                }
            case .streamClosed(let streamID, let errorCode):
                guard let stream = streams.removeValue(forKey: streamID) else { break }
                if !stream.ended {
                    // Closed without a status: refused by GOAWAY (never processed) or reset.
                    stream.ended = true
                    let (error, processed) = Self.error(forReset: errorCode, deadline: stream.transport.request.deadline)
                    stream.transport.fail(error, processed: processed)
                }
                stream.failSendWaiter(RPCError(.cancelled, "the call has ended"))
                connectionState.setActiveStreams(streams.count)
                if let action = state.streamClosed(now: .now()) { perform(action) }
            case .settings(acknowledgement: false):
                if state.settingsReceived() { readyPromise.succeed(()) }
            case .ping(acknowledgement: true):
                perform(state.pingAcknowledged(now: .now()))
            case .goaway(let lastStreamID, let errorCode):
                receiveGoaway(lastStreamID: lastStreamID, errorCode: errorCode)
            case .settings, .ping, .streamFrameSent, .goawaySent:
                break
            }
        }
    }

    /// RST_STREAM codes as gRPC statuses (GRPC-NOTES: CANCEL, REFUSED_STREAM, ENHANCE_YOUR_CALM, others).
    static func error(
        forReset code: HTTP2ErrorCode, deadline: ContinuousClock.Instant?
    ) -> (RPCError, processed: Bool) {
        switch code {
        case .refusedStream:
            return (RPCError(.unavailable, "the server refused the stream"), false)
        case .cancel:
            if let deadline, deadline <= .now { return (RPCError(.deadlineExceeded, "deadline exceeded"), true) }
            return (RPCError(.cancelled, "the server cancelled the stream"), true)
        case .enhanceYourCalm:
            return (RPCError(.resourceExhausted, "the server reset the stream: ENHANCE_YOUR_CALM"), true)
        default:
            return (RPCError(.internal, "the server reset the stream: \(code)"), true)
        }
    }

    func receiveHeaders(_ fields: [HTTP2HeaderField], endStream: Bool, stream: ClientStream) {
        guard !stream.ended else { return }
        let head = ClientResponseHead(fields)
        if stream.headersReceived || endStream {
            // Trailers, or a Trailers-Only response.
            if stream.headersReceived, !stream.deframer.isAtMessageBoundary {
                return end(stream, .failed(RPCError(.internal, "the response ended inside a message"), processed: true))
            }
            if !stream.headersReceived, head.grpcStatus == nil, let error = head.invalidResponseError {
                return end(stream, .failed(error, processed: true))
            }
            stream.headersReceived = true
            if let error = head.status() {
                end(stream, .failed(error, processed: true))
            } else {
                end(stream, .ok(trailers: head.metadata))
            }
            return
        }
        stream.headersReceived = true
        if let error = head.invalidResponseError {
            return failStream(stream, error)
        }
        if let encoding = head.encoding, encoding != "identity" {
            guard encoding == MessageCompression.gzip.rawValue else {
                return failStream(stream, RPCError(.internal, "the server used the unsupported grpc-encoding \"\(encoding)\""))
            }
            stream.responsesGzipped = true
        }
        stream.transport.deliver(.headers(head.metadata))
    }

    func receiveData(_ bytes: ByteBuffer, streamID: Int32) {
        guard let session else { return }
        guard let stream = streams[streamID], !stream.ended else {
            session.consume(bytes.readableBytes, streamID: streamID)
            return
        }
        stream.deframer.append(bytes)
        var queued = 0
        do {
            while let framed = try stream.deframer.next() {
                var payload = framed.payload
                if framed.compressed {
                    guard stream.responsesGzipped else {
                        throw RPCError(.internal, "received a compressed message without a grpc-encoding")
                    }
                    do {
                        payload = try Gzip.decompress(framed.payload, limit: stream.transport.request.maxReceiveMessageSize)
                    } catch .tooLarge(let limit) {
                        throw RPCError(
                            .resourceExhausted, "decompressed response message larger than the limit of \(limit) bytes")
                    } catch .corrupt(let reason) {
                        throw RPCError(.internal, "could not decompress the response message: \(reason)")
                    }
                }
                queued = stream.transport.deliver(.message(ReceivedMessage(payload: payload, wasCompressed: framed.compressed)))
            }
        } catch let failure as MessageDeframer.Failure {
            session.consume(bytes.readableBytes, streamID: streamID)
            switch failure {
            case .messageTooLarge(let length, let limit):
                return failStream(
                    stream, RPCError(.resourceExhausted, "response message larger than max (\(length) vs. \(limit) bytes)"))
            case .invalidFlag(let flag):
                return failStream(stream, RPCError(.internal, "invalid compressed-flag byte \(flag) in message prefix"))
            }
        } catch {
            session.consume(bytes.readableBytes, streamID: streamID)
            return failStream(stream, error as? RPCError ?? RPCError(.internal, "could not read the response"))
        }
        // Back-pressure: stop reopening the window while the caller has a backlog of whole messages.
        if queued >= configuration.responseQueueHighWatermark {
            stream.withheldBytes += bytes.readableBytes
            stream.transport.withholdCredit()
        } else {
            session.consume(bytes.readableBytes, streamID: streamID)
        }
    }

    /// The call ended with a status from the server (or a malformed response).
    func end(_ stream: ClientStream, _ outcome: AttemptEnd) {
        stream.ended = true
        stream.transport.deliver(.end(outcome))
        stream.failSendWaiter(RPCError(.cancelled, "the call has ended"))
        // Still sending: tell the server to stop reading (the stream would otherwise stay half-open).
        if !stream.requestsFinished, let streamID = stream.transport.streamID {
            session?.resetStream(streamID, errorCode: .cancel)
            scheduleFlush()
        }
    }

    /// Ends a call from our side: RST_STREAM(CANCEL) and `error` to the caller.
    func failStream(_ stream: ClientStream, _ error: RPCError) {
        guard !stream.ended else { return }
        stream.ended = true
        stream.transport.fail(error)
        stream.failSendWaiter(error)
        if let streamID = stream.transport.streamID { session?.resetStream(streamID, errorCode: .cancel) }
        scheduleFlush()
    }

    func receiveGoaway(lastStreamID: Int32, errorCode: HTTP2ErrorCode) {
        logger.debug("server sent GOAWAY", metadata: ["lastStreamID": "\(lastStreamID)", "code": "\(errorCode)"])
        connectionState.markGoingAway()
        if errorCode == .enhanceYourCalm, configuration.keepalive != nil {
            let interval = keepaliveInterval.double()
            logger.notice("server says we ping too often (too_many_pings); keepalive interval now \(interval)")
        }
        // Every call the server accepted may have finished: the connection would have nothing left to do.
        if let action = state.goawayReceived() { perform(action) }
    }

    // MARK: Output

    func resumeWriters() {
        guard let session else { return }
        let lowWatermark = configuration.requestQueueHighWatermark / 2
        for (streamID, stream) in streams {
            guard let waiter = stream.sendWaiter, session.queuedOutboundBytes(streamID: streamID) <= lowWatermark
            else { continue }
            stream.sendWaiter = nil
            waiter.resume()
        }
    }

    // MARK: Connection management

    /// The keepalive interval is the channel's current one: it doubles after a server's `too_many_pings`.
    func timerFired(_ timer: ConnectionStateMachine.Timer, now: NIODeadline) {
        if timer == .keepalive {
            perform(state.keepaliveTimerFired(now: now, interval: TimeAmount(keepaliveInterval.current)))
        } else {
            perform(state.timerFired(timer, now: now))
        }
    }

    func sessionFailedWhileSending(_ error: any Error) {
        logger.info("HTTP/2 session failed while sending; closing", metadata: ["error": "\(error)"])
    }

    /// (Only a server's state machine has a grace period.)
    func cancelAllStreams() {
        for (_, stream) in streams { failStream(stream, RPCError(.unavailable, "the connection is closing")) }
    }

    func willPerform(_ action: ConnectionStateMachine.Action) {
        if action == .closeNow { logger.info("keepalive ping not answered; closing") }
    }
}
