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

/// Responses: messages, headers and status trailers the handlers send, their flow control, and how calls end
/// (handler finished, deadline passed, failure).
extension ServerConnectionHandler {
    /// The handler pulled enough messages: return the flow-control credit held back.
    func releaseRequestCredit(streamID: Int32) {
        guard let stream = streams[streamID], stream.withheldBytes > 0 else { return }
        session?.consume(stream.withheldBytes, streamID: streamID)
        stream.withheldBytes = 0
        scheduleFlush()
    }

    /// Queues one response message (sending the response headers first if needed).
    func sendResponse(_ payload: ByteBuffer, compressed: Bool, streamID: Int32) -> SendOutcome {
        guard let session, let context, let stream = streams[streamID], !stream.statusSent else { return .callEnded }
        let queuedBefore = session.queuedOutboundBytes(streamID: streamID)
        if stream.web != nil {
            let metadata = stream.context.initialMetadata
            guard writeWebParts(stream, { (encoder) throws(RPCError) in try encoder.message(payload, initialMetadata: metadata) })
            else { return .callEnded }
        } else {
            if !stream.headersSent { sendResponseHeaders(stream, wantsCompression: compressed) }
            let compress = compressed && stream.responseEncoding == .gzip
            let body = compress ? Gzip.compress(payload) : payload
            session.writeData(
                framedMessage(body, compressed: compress, allocator: context.channel.allocator), streamID: streamID)
        }
        scheduleFlush()
        let full =
            session.queuedOutboundBytes(streamID: streamID) > configuration.responseQueueHighWatermark
            || (queuedBefore > 0
                && session.totalQueuedOutboundBytes > configuration.connectionResponseQueueHighWatermark)
        return full ? .queueFull : .queued
    }

    /// Sends the response headers of a call now, unless they went out already; false once the call has ended.
    func sendInitialMetadata(streamID: Int32) -> Bool {
        guard session != nil, let stream = streams[streamID], !stream.statusSent else { return false }
        if stream.web != nil {
            _ = writeWebParts(stream) { $0.initialMetadata(stream.context.initialMetadata) }
            scheduleFlush()
        } else if !stream.headersSent {
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

    func sendResponseHeaders(_ stream: ServerStream, wantsCompression: Bool) {
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
        let status = CallStatus(ending: outcome, method: stream.context.method, logger: logger)
        sendStatus(
            stream, code: status.code, message: status.message, details: status.details,
            encodedDetails: status.encodedDetails, extraTrailers: status.trailers)
    }

    func armDeadlineTimer(by deadline: NIODeadline) {
        guard let context else { return }
        timers.expireCalls(by: deadline, on: context.eventLoop, owner: self)
    }

    /// Ends the calls past their deadline, then waits for the earliest deadline left.
    func callDeadlinePassed(now: NIODeadline) {
        let (expired, next) = sweepCallDeadlines(streams.values, now: now) { $0.statusSent ? nil : $0.timerDeadline }
        for stream in expired { failCall(stream, RPCError(.deadlineExceeded, "deadline exceeded")) }
        if let next { armDeadlineTimer(by: next) }
    }

    /// Ends a call from the runtime's side: status out, handler cancelled, the client told to stop sending.
    func failCall(_ stream: ServerStream, _ error: RPCError) {
        guard !stream.statusSent else { return }
        sendStatus(
            stream, code: error.code, message: error.message, details: error.details,
            encodedDetails: error.receivedStatusDetails, extraTrailers: error.trailers)
        stream.abandon(error: error)
    }

    func sendStatus(
        _ stream: ServerStream, code: RPCStatusCode, message: String, details: [Google_Protobuf_Any],
        encodedDetails: [UInt8]? = nil, extraTrailers: Metadata
    ) {
        guard let session else { return }
        if stream.web != nil {
            return sendWebStatus(
                stream, CallStatus(code: code, message: message, details: details, encodedDetails: encodedDetails,
                    trailers: extraTrailers))
        }
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
        callEnded(stream)
    }

    /// After the status went out: the client is told to stop sending, and a parked writer learns the call ended.
    func callEnded(_ stream: ServerStream) {
        session?.resetAfterEndOfStream(stream.streamID)
        if let waiter = stream.responseWaiter {
            stream.responseWaiter = nil
            waiter.resume(throwing: RPCError(.cancelled, "the call has ended"))
        }
        scheduleFlush()
    }
}
