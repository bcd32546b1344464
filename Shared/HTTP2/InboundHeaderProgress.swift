public import NIOCore

/// Whether a client is in the middle of its connection preface or of a header block, and since when: what a
/// slowloris client drags out, a byte at a time, to hold a connection open.
///
/// A server feeds it the same bytes as its ``HTTP2Session``; it follows them only as far as frame boundaries (nghttp2
/// does the parsing proper). "Incomplete" covers the client preface with its first SETTINGS frame, a partly received
/// frame header, and a header block from its HEADERS frame up to the end of the frame that carries END_HEADERS.
public struct InboundHeaderProgress: Sendable {
    /// When the preface or header block still incomplete began (the connection's start for the preface, otherwise
    /// the read that brought its first byte); `nil` while the client is between frames or inside a DATA frame.
    public private(set) var incompleteSince: NIODeadline?

    private var magicRemaining = 24  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    private var prefaceDone = false
    private var headerBytesSeen = 0
    private var length = 0
    private var type: UInt8 = 0
    private var flags: UInt8 = 0
    private var payloadRemaining = 0
    private var inHeaderBlock = false

    /// A server connection accepted at `connectionStart`: the client's preface is due.
    public init(connectionStart: NIODeadline) {
        incompleteSince = connectionStart
    }

    private var isIncomplete: Bool {
        !prefaceDone || inHeaderBlock || headerBytesSeen > 0
    }

    /// Follows `bytes`, read from the client at `now`.
    public mutating func received(_ bytes: ByteBuffer, at now: NIODeadline) {
        bytes.withUnsafeReadableBytes { raw in
            var index = 0
            while index < raw.count {
                let wasIncomplete = isIncomplete
                if magicRemaining > 0 {
                    let taken = min(magicRemaining, raw.count - index)
                    magicRemaining -= taken
                    index += taken
                } else if payloadRemaining > 0 {
                    let taken = min(payloadRemaining, raw.count - index)
                    payloadRemaining -= taken
                    index += taken
                    if payloadRemaining == 0 { frameEnded() }
                } else {
                    frameHeaderByte(raw[index])
                    index += 1
                }
                if wasIncomplete != isIncomplete { incompleteSince = wasIncomplete ? nil : now }
            }
        }
    }

    private mutating func frameHeaderByte(_ byte: UInt8) {
        switch headerBytesSeen {
        case 0..<3: length = length << 8 | Int(byte)
        case 3: type = byte
        case 4: flags = byte
        default: break  // the stream identifier
        }
        headerBytesSeen += 1
        guard headerBytesSeen == 9 else { return }
        headerBytesSeen = 0
        if type == Self.headers || type == Self.continuation { inHeaderBlock = true }
        payloadRemaining = length
        length = 0
        if payloadRemaining == 0 { frameEnded() }
    }

    private mutating func frameEnded() {
        prefaceDone = true
        if (type == Self.headers || type == Self.continuation) && flags & Self.endHeaders != 0 { inHeaderBlock = false }
    }

    private static let headers: UInt8 = 0x1
    private static let continuation: UInt8 = 0x9
    private static let endHeaders: UInt8 = 0x4
}
