internal import HabitFlowCompression
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore

/// Calls: what ``ClientStreamTransport`` asks of the connection, on its event loop.
extension ClientConnectionHandler {
    /// Opens the stream of one call attempt; failures reach the caller through the transport.
    func open(_ transport: ClientStreamTransport) {
        guard let session, let context, state.takesNewStreams else {
            return transport.fail(RPCError(.unavailable, "the connection is closing"), processed: false)
        }
        let request = transport.request
        // One allocation for the whole block (an array literal, then reserving room for the rest, made two).
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(10 + request.metadata.count)
        fields.append(HTTP2HeaderField(name: ":method", value: "POST"))
        fields.append(HTTP2HeaderField(name: ":scheme", value: scheme))
        fields.append(HTTP2HeaderField(name: ":path", value: request.method.path))
        fields.append(HTTP2HeaderField(name: ":authority", value: authority))
        fields.append(HTTP2HeaderField(name: "content-type", value: "application/grpc"))
        fields.append(HTTP2HeaderField(name: "te", value: "trailers"))
        fields.append(HTTP2HeaderField(name: "user-agent", value: configuration.userAgent))
        fields.append(HTTP2HeaderField(name: "grpc-accept-encoding", value: "identity,gzip"))
        var remaining: Duration?
        if let deadline = request.deadline {
            let left = deadline - .now
            guard left > .zero else {
                return transport.fail(RPCError(.deadlineExceeded, "deadline exceeded before the call started"))
            }
            remaining = left
            // The remaining time differs on every call: indexing it would only push reusable fields out of the tables.
            fields.append(.init(name: "grpc-timeout", value: GRPCTimeout.format(left), neverIndexed: true))
        }
        if let compression = request.compression {
            fields.append(.init(name: "grpc-encoding", value: compression.rawValue))
        }
        request.metadata.forEachHeaderField { name, value, neverIndexed in
            if !Self.isReserved(name) { fields.append(.init(name: name, value: value, neverIndexed: neverIndexed)) }
        }

        let streamID: Int32
        do {
            streamID = try session.submitRequest(fields, endStream: false)
        } catch {
            return transport.fail(
                configuration.unavailable("could not open a stream to \(target): \(error)"), processed: false)
        }
        transport.streamID = streamID
        let stream = ClientStream(transport: transport, maxReceiveMessageSize: request.maxReceiveMessageSize)
        streams[streamID] = stream
        state.streamOpened()
        connectionState.setActiveStreams(streams.count)
        if let single = request.singleRequest {
            write(single, on: stream, streamID: streamID, session: session)
            stream.requestsFinished = true
            session.finishStream(streamID, trailers: nil)
        }
        if let remaining {
            let deadline = NIODeadline.now() + TimeAmount(remaining)
            stream.timerDeadline = deadline
            armDeadlineTimer(by: deadline, on: context.eventLoop)
        }
        scheduleFlush()
    }

    func armDeadlineTimer(by deadline: NIODeadline, on eventLoop: any EventLoop) {
        timers.expireCalls(by: deadline, on: eventLoop, owner: self)
    }

    /// Cancels the calls past their deadline, then waits for the earliest deadline left.
    func callDeadlinePassed(now: NIODeadline) {
        guard let context else { return }
        let (expired, next) = sweepCallDeadlines(streams.values, now: now) { $0.ended ? nil : $0.timerDeadline }
        for stream in expired { failStream(stream, RPCError(.deadlineExceeded, "deadline exceeded")) }
        if let next { armDeadlineTimer(by: next, on: context.eventLoop) }
    }

    /// Pseudo-headers and the fields the runtime sets itself are not taken from call metadata.
    static func isReserved(_ name: String) -> Bool {
        name.hasPrefix(":") || name.hasPrefix("grpc-") || name == "te" || name == "content-type"
            || name == "user-agent" || name == "connection"
    }

    func write(_ message: ByteBuffer, on stream: ClientStream, streamID: Int32, session: HTTP2Session) {
        let compress = stream.transport.request.compression == .gzip
        let body = compress ? Gzip.compress(message) : message
        session.writeData(framedMessage(body, compressed: compress, allocator: context!.channel.allocator), streamID: streamID)
    }

    func sendMessage(
        _ message: ByteBuffer, on transport: ClientStreamTransport,
        whenQueued continuation: UnsafeContinuation<Void, any Error>
    ) {
        guard let session, let streamID = transport.streamID, let stream = streams[streamID], !stream.ended,
            !stream.requestsFinished
        else {
            return continuation.resume(throwing: RPCError(.cancelled, "the call has ended"))
        }
        write(message, on: stream, streamID: streamID, session: session)
        scheduleFlush()
        if session.queuedOutboundBytes(streamID: streamID) > configuration.requestQueueHighWatermark {
            stream.sendWaiter = continuation
        } else {
            continuation.resume()
        }
    }

    func finishRequests(on transport: ClientStreamTransport) {
        guard let session, let streamID = transport.streamID, let stream = streams[streamID], !stream.ended,
            !stream.requestsFinished
        else { return }
        stream.requestsFinished = true
        session.finishStream(streamID, trailers: nil)
        scheduleFlush()
    }

    func cancelStream(_ transport: ClientStreamTransport, error: RPCError) {
        guard let streamID = transport.streamID, let stream = streams[streamID] else {
            return transport.fail(error)
        }
        failStream(stream, error)
    }

    /// The caller read enough messages: return the flow-control credit held back.
    func releaseResponseCredit(on transport: ClientStreamTransport) {
        guard let streamID = transport.streamID, let stream = streams[streamID], stream.withheldBytes > 0 else { return }
        session?.consume(stream.withheldBytes, streamID: streamID)
        stream.withheldBytes = 0
        scheduleFlush()
    }
}

/// One call attempt on the connection, owned by the handler (event loop only).
final class ClientStream {
    let transport: ClientStreamTransport
    var deframer: MessageDeframer
    var responsesGzipped = false
    var headersReceived = false
    /// The status is known (or the attempt failed): nothing more goes to the caller.
    var ended = false
    var requestsFinished = false
    /// Received bytes whose flow-control credit is held back (back-pressure).
    var withheldBytes = 0
    var sendWaiter: UnsafeContinuation<Void, any Error>?
    /// When the attempt's deadline passes (the connection's call deadline timer cancels it then).
    var timerDeadline: NIODeadline?

    init(transport: ClientStreamTransport, maxReceiveMessageSize: Int) {
        self.transport = transport
        self.deframer = MessageDeframer(maxMessageSize: maxReceiveMessageSize)
    }

    func failSendWaiter(_ error: RPCError) {
        if let waiter = sendWaiter {
            sendWaiter = nil
            waiter.resume(throwing: error)
        }
    }
}
