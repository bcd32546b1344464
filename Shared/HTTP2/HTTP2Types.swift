internal import CNGHTTP2
public import NIOCore

/// One header field as it travels in a HEADERS frame (names are lower-case on the wire).
public struct HTTP2HeaderField: Hashable, Sendable {
    public var name: String
    public var value: String
    /// HPACK's "never indexed" representation (RFC 7541 section 6.2.3): the field stays out of both ends' dynamic
    /// tables, and an intermediary must pass it on the same way. For secrets on a connection that also carries
    /// values someone else chose (whose compressed sizes could otherwise reveal them, section 7.1), and for values
    /// unique to one call, which would only push reusable entries out of the tables. On a received field: how the
    /// peer sent it.
    public var neverIndexed: Bool

    public init(name: String, value: String, neverIndexed: Bool = false) {
        self.name = name
        self.value = value
        self.neverIndexed = neverIndexed
    }
}

/// What a session saw while receiving or sending, in wire order.
public enum HTTP2Event: Sendable {
    /// A complete header block (request or response headers, or trailers).
    case headers(streamID: Int32, fields: [HTTP2HeaderField], endStream: Bool)
    /// Payload bytes of one DATA frame (possibly a part of one).
    case data(streamID: Int32, ByteBuffer)
    /// The peer half-closed the stream with an END_STREAM DATA frame.
    case endOfStream(streamID: Int32)
    /// The peer reset the stream.
    case streamReset(streamID: Int32, errorCode: HTTP2ErrorCode)
    /// The stream is closed on both sides (or reset) and forgotten by the session.
    case streamClosed(streamID: Int32, errorCode: HTTP2ErrorCode)
    case settings(acknowledgement: Bool)
    /// A PING arrived; nghttp2 answers non-ACK pings itself.
    case ping(acknowledgement: Bool)
    case goaway(lastStreamID: Int32, errorCode: HTTP2ErrorCode)
    /// A HEADERS or DATA frame of this stream went out (keepalive policy resets its strike count on these).
    case streamFrameSent(streamID: Int32)
    case goawaySent
}

/// An HTTP/2 error code (RFC 9113 section 7), as sent in RST_STREAM and GOAWAY.
public struct HTTP2ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let noError = Self(rawValue: 0x0)
    public static let protocolError = Self(rawValue: 0x1)
    public static let internalError = Self(rawValue: 0x2)
    public static let flowControlError = Self(rawValue: 0x3)
    public static let settingsTimeout = Self(rawValue: 0x4)
    public static let streamClosed = Self(rawValue: 0x5)
    public static let frameSizeError = Self(rawValue: 0x6)
    public static let refusedStream = Self(rawValue: 0x7)
    public static let cancel = Self(rawValue: 0x8)
    public static let compressionError = Self(rawValue: 0x9)
    public static let connectError = Self(rawValue: 0xa)
    public static let enhanceYourCalm = Self(rawValue: 0xb)
    public static let inadequateSecurity = Self(rawValue: 0xc)
    public static let http11Required = Self(rawValue: 0xd)

    public var description: String {
        String(cString: nghttp2_http2_strerror(rawValue))
    }
}

/// A failure reported by nghttp2 (a negative library error code).
public struct HTTP2Error: Error, CustomStringConvertible {
    public var code: Int32
    /// Events the failing call produced before it failed (for example the frames that led to it).
    public var events: [HTTP2Event]

    init(code: Int32, events: [HTTP2Event] = []) {
        self.code = code
        self.events = events
    }

    public var description: String {
        "nghttp2 error \(code): \(String(cString: nghttp2_strerror(code)))"
    }

    /// The peer did not start with the HTTP/2 client connection preface.
    public var isBadClientMagic: Bool { code == NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue }
    /// The peer flooded us (too many SETTINGS, PING ACKs, resets or CONTINUATION frames).
    public var isFlood: Bool { code == NGHTTP2_ERR_FLOODED.rawValue }
}

/// Connection-level knobs: the SETTINGS we advertise and nghttp2's local options.
public struct HTTP2Configuration: Sendable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we advertise (nghttp2's default is effectively unlimited).
    public var maxConcurrentStreams: UInt32 = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE we advertise: how much each stream may send us before we consume it.
    public var initialStreamWindowSize: Int32 = 4 << 20
    /// Our connection-level receive window (the 64 KiB default collapses throughput on large messages).
    public var connectionWindowSize: Int32 = 16 << 20
    /// SETTINGS_MAX_HEADER_LIST_SIZE we advertise.
    public var maxHeaderListSize: UInt32 = 16 << 10
    /// When true, received DATA only reopens windows through ``HTTP2Session/consume(_:streamID:)`` (back-pressure).
    public var manualFlowControl = false
    /// Rapid Reset protection (CVE-2023-44487): at most `burst` RST_STREAMs, refilled at `ratePerSecond`.
    public var streamResetBurst: UInt64 = 1000
    public var streamResetRatePerSecond: UInt64 = 33
    /// CONTINUATION flood protection (CVE-2024-28182).
    public var maxContinuations = 8

    public init() {}

    func apply(to option: OpaquePointer?) {
        nghttp2_option_set_no_auto_window_update(option, manualFlowControl ? 1 : 0)
        nghttp2_option_set_stream_reset_rate_limit(option, streamResetBurst, streamResetRatePerSecond)
        nghttp2_option_set_max_continuations(option, maxContinuations)
        nghttp2_option_set_max_send_header_block_length(option, 64 << 10)
        // No RFC 7540 priority tree (see `settingsEntries`), so no closed streams kept for it either.
        nghttp2_option_set_no_closed_streams(option, 1)
    }

    func settingsEntries() -> [nghttp2_settings_entry] {
        [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: UInt32(initialStreamWindowSize)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: maxHeaderListSize),
            // RFC 9218: we do not use RFC 7540's stream priorities (gRPC has none). nghttp2 then schedules streams
            // without its dependency tree and ignores PRIORITY frames, which saves work on every stream.
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES.rawValue), value: 1),
        ]
    }
}
