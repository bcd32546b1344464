internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowRPCWeb
internal import NIOCore

/// Web calls (gRPC-Web, Connect unary) on the HTTP/2 connection: the same streams, router and interceptors as native
/// gRPC; only the reading of the request body and the writing of the response differ (``WebCallCodec``).
extension ServerConnectionHandler: WebCallConnection {
    /// Starts, answers or refuses a web request; false when the request is not a web one (the caller answers it as
    /// it would without web protocols).
    func startWebCall(streamID: Int32, head: ServerRequestHead, web: WebConfiguration, endStream: Bool) -> Bool {
        guard let session, let context else { return true }
        let decision = WebRequestDecision.decide(
            head, router: router, web: web, maxMessageSize: configuration.maxReceiveMessageSize,
            allocator: context.channel.allocator)
        switch decision {
        case .notWeb:
            return false
        case .preflight(let headers):
            submitWebParts([.head(status: 204, headers: headers)], streamID: streamID, endStream: true)
            session.resetAfterEndOfStream(streamID)
            scheduleFlush()
        case .reject(let codec, let error):
            logger.debug("rejected web request", metadata: ["stream": "\(streamID)", "status": "\(error)"])
            submitWebParts(codec.encoder.rejection(error), streamID: streamID)
            session.resetAfterEndOfStream(streamID)
            scheduleFlush()
        case .call(let method, let codec, let metadata, let timeout):
            openCall(
                streamID: streamID, method: method, metadata: metadata, timeout: timeout,
                deadline: timeout.map { .now + $0 }, requestEncoding: nil, acceptsGzip: false, web: codec,
                endStream: endStream)
        }
        return true
    }

    func receiveWebData(_ bytes: ByteBuffer, stream: ServerStream) {
        // A web call has one request message (browsers cannot stream requests): no back-pressure to apply.
        session?.consume(bytes.readableBytes, streamID: stream.streamID)
        receiveWebBody(bytes, of: stream)
    }

    func sendWebStatus(_ stream: ServerStream, _ status: CallStatus) {
        writeWebStatus(stream, status)
        callEnded(stream)
    }

    func submitWebParts(_ parts: [WebResponsePart], of stream: ServerStream) {
        submitWebParts(parts, streamID: stream.streamID)
    }

    /// HTTP/2 for the parts: the head as a HEADERS frame, the body as DATA, the end as END_STREAM on the last DATA.
    /// `endStream`: the head is all there is (a preflight answer).
    private func submitWebParts(_ parts: [WebResponsePart], streamID: Int32, endStream: Bool = false) {
        guard let session else { return }
        for part in parts {
            switch part {
            case .head(let status, let headers):
                var fields = [HTTP2HeaderField(name: ":status", value: String(status))]
                fields.reserveCapacity(1 + headers.count)
                for header in headers { fields.append(HTTP2HeaderField(name: header.name, value: header.value)) }
                do {
                    try session.submitResponse(fields, streamID: streamID, endStream: endStream)
                } catch {
                    logger.error("could not submit web response headers", metadata: ["error": "\(error)"])
                }
            case .body(let bytes):
                session.writeData(bytes, streamID: streamID)
            case .end:
                session.finishStream(streamID, trailers: nil)
            }
        }
    }
}
