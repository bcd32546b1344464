internal import HabitFlowBase64
public import NIOCore

/// gRPC-Web's additions to gRPC's message framing (grpc/grpc `doc/PROTOCOL-WEB.md`).
public enum GRPCWebFraming {
    /// The flag byte of the frame that carries the trailers (the most significant bit set; gRPC messages use 0 or 1).
    public static let trailerFlag: UInt8 = 0x80

    /// The trailer frame: flag 0x80, a 4-byte big-endian length, then the trailers as HTTP/1 header lines
    /// (`name: value\r\n`, lower-case names).
    public static func trailerFrame(
        _ fields: some Sequence<(name: String, value: String)>, allocator: ByteBufferAllocator
    ) -> ByteBuffer {
        var block = allocator.buffer(capacity: 64)
        for field in fields {
            block.writeString(field.name.lowercased())
            block.writeStaticString(": ")
            block.writeString(field.value)
            block.writeStaticString("\r\n")
        }
        var frame = allocator.buffer(capacity: 5 + block.readableBytes)
        frame.writeInteger(trailerFlag)
        frame.writeInteger(UInt32(block.readableBytes), endianness: .big)
        frame.writeBuffer(&block)
        return frame
    }

    /// Parses a trailer frame's header lines (what a client does; for tests and tools).
    public static func parseTrailerBlock(_ block: ByteBuffer) -> [(name: String, value: String)] {
        let text = String(buffer: block)
        return text.split(separator: "\r\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            return (String(line[..<colon]).lowercased(), String(value))
        }
    }

    /// `grpc-web-text`: one written chunk as base64. Each chunk is encoded and padded on its own (the spec allows
    /// it, and clients decode padded chunks one after another), so a streamed message goes out at once instead of
    /// waiting for 3-byte alignment with the next one.
    public static func textEncoded(_ chunk: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        let text = chunk.withUnsafeReadableBytes { Base64.encode($0) }
        var encoded = allocator.buffer(capacity: text.utf8.count)
        encoded.writeString(text)
        return encoded
    }
}

/// Decodes a `grpc-web-text` request body as it arrives: base64 in any chunking, padded at the end or after each
/// chunk the client wrote (a quartet with `=` ends a run; decoding starts afresh after it).
public struct GRPCWebTextDecoder: Sendable {
    /// Base64 characters received but not yet decoded: fewer than four, or a run waiting for its end.
    private var pending: [UInt8] = []

    public init() {}

    /// Whether the bytes so far end on a quartet boundary (a body may end only there).
    public var isAtBoundary: Bool { pending.isEmpty }

    /// Decodes every complete quartet received so far; `nil` when the text is not base64.
    public mutating func append(_ text: ByteBuffer) -> [UInt8]? {
        for byte in text.readableBytesView where !Self.isWhitespace(byte) { pending.append(byte) }
        let complete = pending.count - pending.count % 4
        guard complete > 0 else { return [] }
        var decoded: [UInt8] = []
        var runStart = 0
        var index = 0
        while index < complete {
            let quartetEnd = index + 4
            // A padded quartet ends a run: decode the run through it on its own.
            if pending[index + 2] == UInt8(ascii: "=") || pending[index + 3] == UInt8(ascii: "=") {
                guard let run = Self.decode(pending[runStart..<quartetEnd]) else { return nil }
                decoded += run
                runStart = quartetEnd
            }
            index = quartetEnd
        }
        if runStart < complete {
            guard let run = Self.decode(pending[runStart..<complete]) else { return nil }
            decoded += run
        }
        pending.removeFirst(complete)
        return decoded
    }

    private static func decode(_ quartets: ArraySlice<UInt8>) -> [UInt8]? {
        Base64.decode(String(decoding: quartets, as: UTF8.self))
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\t")
    }
}
