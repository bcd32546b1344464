internal import CNGHTTP2
public import NIOCore

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// One HTTP/2 connection endpoint (client or server), driven entirely in memory by nghttp2.
///
/// Bytes read from the socket go in through ``receive(_:)``, which returns the protocol events they produced; bytes to
/// write come out of ``drainOutput(into:)``. nghttp2 does framing, HPACK, flow control and settings; the owner
/// (an event-loop channel handler) decides what the events mean.
///
/// - Important: Not thread-safe. One owner (one event loop) drives a session; it is deliberately not `Sendable`.
public final class HTTP2Session {
    public enum Role: Sendable {
        case client
        case server
    }

    private var session: OpaquePointer?
    let role: Role
    private let allocator = ByteBufferAllocator()
    /// nghttp2's allocator for this session; it must outlive the session.
    private let memory = SessionMemory()
    /// Whether the last `nghttp2_session_mem_send` returned 0: nghttp2 is not in the middle of a frame.
    private var outputDrained = false

    /// Events produced by the callbacks of the current ``receive(_:)`` or ``drainOutput(into:)`` call.
    private var pendingEvents: [HTTP2Event] = []
    /// The header block being received. Header blocks never interleave (HEADERS then CONTINUATION frames of one
    /// stream), so one is enough.
    private var incomingHeaders = IncomingHeaderBlock()
    private let maxHeaderListSize: Int
    /// Outbound DATA (and trailers) waiting for nghttp2 to pull them, per stream.
    private var outbound: [Int32: OutboundStream] = [:]
    /// Bytes queued with ``writeData(_:streamID:)`` on all streams that nghttp2 has not taken yet.
    public private(set) var totalQueuedOutboundBytes = 0
    /// Streams to reset with NO_ERROR once our END_STREAM is out, if the peer is still sending.
    private var resetAfterEndStream: Set<Int32> = []

    /// Creates a session and queues our SETTINGS frame (the server also expects the client preface).
    public init(role: Role, configuration: HTTP2Configuration = .init()) throws(HTTP2Error) {
        self.role = role
        self.maxHeaderListSize = Int(configuration.maxHeaderListSize)

        var callbacks: OpaquePointer?
        try check(nghttp2_session_callbacks_new(&callbacks))
        defer { nghttp2_session_callbacks_del(callbacks) }
        installCallbacks(callbacks)

        var option: OpaquePointer?
        try check(nghttp2_option_new(&option))
        defer { nghttp2_option_del(option) }
        configuration.apply(to: option)

        let userData = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        try memory.creatingSession { (mem) throws(HTTP2Error) in
            switch role {
            case .server: try check(nghttp2_session_server_new3(&created, callbacks, userData, option, mem))
            case .client: try check(nghttp2_session_client_new3(&created, callbacks, userData, option, mem))
            }
        }
        self.session = created

        var settings = configuration.settingsEntries()
        let count = settings.count
        try check(settings.withUnsafeMutableBufferPointer {
            nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress, count)
        })
        if configuration.connectionWindowSize > 65_535 {
            try check(
                nghttp2_session_set_local_window_size(
                    created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, configuration.connectionWindowSize))
        }
    }

    deinit {
        close()
    }

    /// Frees the nghttp2 session. Idempotent; the session is unusable afterwards.
    public func close() {
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
        outbound.removeAll()
        totalQueuedOutboundBytes = 0
        incomingHeaders = IncomingHeaderBlock()
    }

    /// The nghttp2 library version, for example `1.52.0`.
    public static var libraryVersion: String {
        guard let info = nghttp2_version(0), let version = info.pointee.version_str else { return "unknown" }
        return String(cString: version)
    }

    // MARK: Bytes in, bytes out

    /// Feeds bytes read from the peer and returns the events they produced, in order.
    ///
    /// A thrown error means the peer broke the protocol badly enough that the connection must close (nghttp2 has
    /// already queued a GOAWAY where one applies; drain the output before closing).
    public func receive(_ bytes: ByteBuffer) throws(HTTP2Error) -> [HTTP2Event] {
        guard let session else { throw HTTP2Error(code: NGHTTP2_ERR_INVALID_STATE.rawValue) }
        let consumed = bytes.withUnsafeReadableBytes { raw in
            nghttp2_session_mem_recv(session, raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
        }
        let events = takeEvents()
        if consumed < 0 { throw HTTP2Error(code: Int32(consumed), events: events) }
        return events
    }

    /// Appends every byte nghttp2 wants to send now to `buffer`, or what fits before it holds `limit` bytes (the
    /// frame that crosses it included; ``wantsWrite`` tells whether more is waiting), and returns the events that
    /// sending produced (frames sent, streams closed).
    @discardableResult
    public func drainOutput(into buffer: inout ByteBuffer, limit: Int = .max) throws(HTTP2Error) -> [HTTP2Event] {
        guard let session else { return [] }
        outputDrained = false
        while buffer.readableBytes < limit {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 { throw HTTP2Error(code: Int32(count), events: takeEvents()) }
            guard count > 0, let chunk else {
                outputDrained = true
                break
            }
            // The chunk is valid only until the next mem_send call: copy it out now.
            buffer.writeBytes(UnsafeRawBufferPointer(start: chunk, count: count))
        }
        return takeEvents()
    }

    /// Gives memory back that a connection quiet for a while does not need (see ``SessionMemory``): the pages of
    /// nghttp2's outbound frame buffer, unless the last ``drainOutput(into:limit:)`` left a frame partly out in it; the
    /// page of its stream table when no stream is left in it (looked at only if a stream opened since the last
    /// release); and the header strings kept for reuse. The next frame sent, stream opened or header received takes
    /// its page or string again. Returns the bytes of pages given back.
    @discardableResult
    public func releaseIdleMemory() -> Int {
        guard session != nil else { return 0 }
        incomingHeaders.forgetRecentStrings()
        return memory.releaseIdlePages(outputDrained: outputDrained)
    }

    /// Whether the session still wants to read from or write to the peer; when both are false the connection is done.
    public var wantsReadOrWrite: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// Whether output is waiting for ``drainOutput(into:)``.
    public var wantsWrite: Bool {
        guard let session else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    private func takeEvents() -> [HTTP2Event] {
        let events = pendingEvents
        pendingEvents.removeAll(keepingCapacity: true)
        return events
    }

    // MARK: Submitting frames

    /// Opens a client stream with request `headers`. Without `endStream`, DATA follows through ``writeData(_:streamID:)``.
    public func submitRequest(_ headers: [HTTP2HeaderField], endStream: Bool) throws(HTTP2Error) -> Int32 {
        guard let session else { throw HTTP2Error(code: NGHTTP2_ERR_INVALID_STATE.rawValue) }
        let streamID = try withNameValues(headers) { nva, count throws(HTTP2Error) -> Int32 in
            var provider = Self.dataProvider
            let result =
                endStream
                ? nghttp2_submit_request(session, nil, nva, count, nil, nil)
                : nghttp2_submit_request(session, nil, nva, count, &provider, nil)
            try check(result)
            return result
        }
        if !endStream { outbound[streamID] = OutboundStream() }
        memory.zeroedBlockMayBeWritten()
        return streamID
    }

    /// Sends response `headers` on a server stream. With `endStream` the HEADERS frame ends the stream (a
    /// Trailers-Only response); otherwise DATA and trailers follow.
    public func submitResponse(_ headers: [HTTP2HeaderField], streamID: Int32, endStream: Bool) throws(HTTP2Error) {
        guard let session else { throw HTTP2Error(code: NGHTTP2_ERR_INVALID_STATE.rawValue) }
        try withNameValues(headers) { nva, count throws(HTTP2Error) in
            var provider = Self.dataProvider
            try check(
                endStream
                    ? nghttp2_submit_response(session, streamID, nva, count, nil)
                    : nghttp2_submit_response(session, streamID, nva, count, &provider))
        }
        if !endStream { outbound[streamID] = OutboundStream() }
    }

    /// Queues DATA on a stream opened with a body. Nothing is copied into nghttp2 until it asks for the bytes, so
    /// the peer's flow-control window holds back a fast writer (see ``queuedOutboundBytes(streamID:)``).
    public func writeData(_ data: ByteBuffer, streamID: Int32) {
        guard let stream = outbound[streamID], !stream.finished else { return }
        stream.queuedBytes += data.readableBytes
        totalQueuedOutboundBytes += data.readableBytes
        stream.buffers.append(data)
        resumeIfDeferred(stream, streamID: streamID)
    }

    /// Ends a stream opened with a body: after the queued DATA, either END_STREAM on the last DATA frame or, with
    /// `trailers`, a trailing HEADERS frame that ends it.
    public func finishStream(_ streamID: Int32, trailers: [HTTP2HeaderField]?) {
        guard let stream = outbound[streamID], !stream.finished else { return }
        stream.finished = true
        stream.trailers = trailers
        resumeIfDeferred(stream, streamID: streamID)
    }

    /// Once our side of the stream has ended (trailers or a Trailers-Only HEADERS frame sent), follows up with
    /// RST_STREAM(NO_ERROR) if the peer has not half-closed, telling it to stop sending (RFC 9113 section 8.1).
    public func resetAfterEndOfStream(_ streamID: Int32) {
        resetAfterEndStream.insert(streamID)
    }

    /// Bytes queued with ``writeData(_:streamID:)`` that nghttp2 has not taken yet.
    public func queuedOutboundBytes(streamID: Int32) -> Int {
        outbound[streamID]?.queuedBytes ?? 0
    }

    /// Resets a stream with RST_STREAM and drops whatever was queued for it.
    public func resetStream(_ streamID: Int32, errorCode: HTTP2ErrorCode) {
        guard let session else { return }
        dropOutbound(streamID)
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode.rawValue)
    }

    /// Tells nghttp2 that `count` received DATA bytes of a stream were processed, so its window can reopen.
    /// Only meaningful with ``HTTP2Configuration/manualFlowControl``.
    public func consume(_ count: Int, streamID: Int32) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume(session, streamID, count)
    }

    /// Sends a PING with 8 bytes of opaque data.
    public func ping(_ opaque: UInt64) {
        guard let session else { return }
        withUnsafeBytes(of: opaque.bigEndian) { raw in
            _ = nghttp2_submit_ping(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), raw.bindMemory(to: UInt8.self).baseAddress)
        }
    }

    /// Sends the first GOAWAY of a graceful shutdown (last stream id 2^31-1): clients stop opening streams while
    /// the ones in flight go on. Server only.
    public func submitShutdownNotice() {
        guard let session else { return }
        _ = nghttp2_submit_shutdown_notice(session)
    }

    /// Sends GOAWAY with the last stream we processed; streams above it were refused and are safe to retry.
    public func submitGoaway(errorCode: HTTP2ErrorCode, debugData: String = "") {
        guard let session else { return }
        let lastStream = nghttp2_session_get_last_proc_stream_id(session)
        var bytes = Array(debugData.utf8)
        let count = bytes.count
        bytes.withUnsafeMutableBufferPointer { debug in
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, errorCode.rawValue, debug.baseAddress, count)
        }
    }

    /// Ends the session after the frames already queued: nothing more is read, and ``wantsReadOrWrite`` turns false
    /// once the output is drained.
    public func terminate(errorCode: HTTP2ErrorCode) {
        guard let session else { return }
        _ = nghttp2_session_terminate_session(session, errorCode.rawValue)
    }

    // MARK: Callbacks from nghttp2

    private func dropOutbound(_ streamID: Int32) {
        if let dropped = outbound.removeValue(forKey: streamID) { totalQueuedOutboundBytes -= dropped.queuedBytes }
    }

    private func resumeIfDeferred(_ stream: OutboundStream, streamID: Int32) {
        guard let session, stream.deferred else { return }
        stream.deferred = false
        _ = nghttp2_session_resume_data(session, streamID)
    }

    fileprivate func beginHeaders(streamID: Int32) {
        memory.zeroedBlockMayBeWritten()  // a request opens a stream (on a client: a response, to one already open)
        incomingHeaders.begin(streamID: streamID)
    }

    /// Collects one header field; false when the block outgrew the SETTINGS_MAX_HEADER_LIST_SIZE we advertised
    /// (nghttp2 then resets just that stream).
    fileprivate func header(
        streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, neverIndexed: Bool
    ) -> Bool {
        incomingHeaders.add(streamID: streamID, name: name, value: value, neverIndexed: neverIndexed, limit: maxHeaderListSize)
    }

    fileprivate func frameReceived(type: UInt8, flags: UInt8, streamID: Int32, frame: UnsafePointer<nghttp2_frame>) {
        let endStream = flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(type) {
        case NGHTTP2_HEADERS.rawValue:
            let fields = incomingHeaders.take(streamID: streamID)
            pendingEvents.append(.headers(streamID: streamID, fields: fields, endStream: endStream))
        case NGHTTP2_DATA.rawValue:
            if endStream { pendingEvents.append(.endOfStream(streamID: streamID)) }
        case NGHTTP2_SETTINGS.rawValue:
            pendingEvents.append(.settings(acknowledgement: flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0))
        case NGHTTP2_PING.rawValue:
            pendingEvents.append(.ping(acknowledgement: flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0))
        case NGHTTP2_GOAWAY.rawValue:
            let goaway = frame.pointee.goaway
            pendingEvents.append(
                .goaway(lastStreamID: goaway.last_stream_id, errorCode: HTTP2ErrorCode(rawValue: goaway.error_code)))
        case NGHTTP2_RST_STREAM.rawValue:
            pendingEvents.append(
                .streamReset(streamID: streamID, errorCode: HTTP2ErrorCode(rawValue: frame.pointee.rst_stream.error_code)))
        default:
            break
        }
    }

    fileprivate func dataChunk(streamID: Int32, bytes: UnsafeRawBufferPointer) {
        var buffer = allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        pendingEvents.append(.data(streamID: streamID, buffer))
    }

    fileprivate func frameSent(type: UInt8, flags: UInt8, streamID: Int32) {
        switch UInt32(type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            pendingEvents.append(.streamFrameSent(streamID: streamID))
            if flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, resetAfterEndStream.remove(streamID) != nil,
                let session, nghttp2_session_get_stream_remote_close(session, streamID) == 0
            {
                _ = nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, HTTP2ErrorCode.noError.rawValue)
            }
        case NGHTTP2_GOAWAY.rawValue:
            pendingEvents.append(.goawaySent)
        default:
            break
        }
    }

    fileprivate func streamClosed(streamID: Int32, errorCode: UInt32) {
        dropOutbound(streamID)
        resetAfterEndStream.remove(streamID)
        pendingEvents.append(.streamClosed(streamID: streamID, errorCode: HTTP2ErrorCode(rawValue: errorCode)))
    }

    /// Fills nghttp2's DATA buffer from the stream's queue (the data provider's read callback).
    fileprivate func readOutbound(
        streamID: Int32, into destination: UnsafeMutableRawBufferPointer, flags: inout UInt32
    ) -> Int {
        guard let stream = outbound[streamID] else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        var written = 0
        while written < destination.count, !stream.buffers.isEmpty {
            let take = min(stream.buffers[stream.buffers.startIndex].readableBytes, destination.count - written)
            stream.buffers[stream.buffers.startIndex].withUnsafeReadableBytes { source in
                UnsafeMutableRawBufferPointer(rebasing: destination[written..<(written + take)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<take]))
            }
            stream.buffers[stream.buffers.startIndex].moveReaderIndex(forwardBy: take)
            written += take
            if stream.buffers[stream.buffers.startIndex].readableBytes == 0 { stream.buffers.removeFirst() }
        }
        stream.queuedBytes -= written
        totalQueuedOutboundBytes -= written

        if stream.buffers.isEmpty {
            if stream.finished {
                flags |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if let trailers = stream.trailers, let session {
                    flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                    let submitted = withNameValues(trailers) { nva, count in
                        nghttp2_submit_trailer(session, streamID, nva, count)
                    }
                    if submitted != 0 { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
                }
                outbound[streamID] = nil
                return written
            } else if written == 0 {
                stream.deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        return written
    }

    private static let dataProvider = nghttp2_data_provider(
        source: nghttp2_data_source(ptr: nil),
        read_callback: { _, streamID, buffer, length, flags, _, userData in
            guard let userData, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
            let session = Unmanaged<HTTP2Session>.fromOpaque(userData).takeUnretainedValue()
            return session.readOutbound(
                streamID: streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length),
                flags: &flags.pointee)
        }
    )
}

/// A stream's outbound queue, pulled by nghttp2 as the flow-control window allows. A class, so the queue is
/// mutated in place rather than copied in and out of the dictionary.
private final class OutboundStream {
    var buffers = CircularBuffer<ByteBuffer>(initialCapacity: 2)
    var queuedBytes = 0
    var finished = false
    var trailers: [HTTP2HeaderField]?
    /// The read callback returned DEFERRED; new data must call `nghttp2_session_resume_data`.
    var deferred = false
}

// MARK: - C callback thunks

private func owner(_ userData: UnsafeMutableRawPointer?) -> HTTP2Session? {
    guard let userData else { return nil }
    return Unmanaged<HTTP2Session>.fromOpaque(userData).takeUnretainedValue()
}

private func installCallbacks(_ callbacks: OpaquePointer?) {
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
        guard let frame, let session = owner(userData) else { return 0 }
        session.beginHeaders(streamID: frame.pointee.hd.stream_id)
        return 0
    }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
        _, frame, name, nameLength, value, valueLength, flags, userData in
        guard let frame, let session = owner(userData) else { return 0 }
        let accepted = session.header(
            streamID: frame.pointee.hd.stream_id,
            name: UnsafeRawBufferPointer(start: name, count: nameLength),
            value: UnsafeRawBufferPointer(start: value, count: valueLength),
            neverIndexed: flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0)
        return accepted ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
        guard let frame, let session = owner(userData) else { return 0 }
        let header = frame.pointee.hd
        session.frameReceived(type: header.type, flags: header.flags, streamID: header.stream_id, frame: frame)
        return 0
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
        guard let session = owner(userData) else { return 0 }
        session.dataChunk(streamID: streamID, bytes: UnsafeRawBufferPointer(start: data, count: length))
        return 0
    }
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
        guard let frame, let session = owner(userData) else { return 0 }
        let header = frame.pointee.hd
        session.frameSent(type: header.type, flags: header.flags, streamID: header.stream_id)
        return 0
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
        guard let session = owner(userData) else { return 0 }
        session.streamClosed(streamID: streamID, errorCode: errorCode)
        return 0
    }
}

@inline(__always)
private func check(_ result: Int32) throws(HTTP2Error) {
    if result < 0 { throw HTTP2Error(code: result) }
}
