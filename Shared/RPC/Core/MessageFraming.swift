public import NIOCore

/// One gRPC Length-Prefixed-Message: a compressed flag and the (possibly compressed) payload.
public struct FramedMessage: Sendable {
    public var compressed: Bool
    public var payload: ByteBuffer

    public init(compressed: Bool, payload: ByteBuffer) {
        self.compressed = compressed
        self.payload = payload
    }
}

/// Splits a stream of DATA bytes into Length-Prefixed-Messages (1-byte flag, 4-byte big-endian length, payload).
///
/// Messages may span DATA frames and a frame may hold several messages. The length is checked against the limit as
/// soon as the 5-byte prefix is in, so an oversized message is refused before it is buffered.
public struct MessageDeframer: Sendable {
    public enum Failure: Error, Sendable, Equatable {
        /// The prefix announced a message larger than the limit.
        case messageTooLarge(length: Int, limit: Int)
        /// The compressed-flag byte was neither 0 nor 1.
        case invalidFlag(UInt8)
    }

    public let maxMessageSize: Int
    /// Empty until bytes arrive (an empty `ByteBuffer()` still allocates storage).
    private var buffer: ByteBuffer?
    /// The prefix of the message being assembled, once read.
    private var pending: (compressed: Bool, length: Int)?

    public init(maxMessageSize: Int) {
        self.maxMessageSize = maxMessageSize
    }

    /// Bytes received but not yet part of a complete message.
    public var bufferedBytes: Int { buffer?.readableBytes ?? 0 }

    /// True when no partial message is buffered (a stream may end only here).
    public var isAtMessageBoundary: Bool { pending == nil && bufferedBytes == 0 }

    /// Appends received bytes.
    public mutating func append(_ bytes: ByteBuffer) {
        if bufferedBytes == 0 {
            buffer = bytes  // the common case: no copy
        } else {
            var bytes = bytes
            buffer!.writeBuffer(&bytes)
        }
    }

    /// The next complete message, or `nil` when more bytes are needed.
    ///
    /// When the prefix and the payload are in one buffer (the common case), the payload keeps its prefix in front of
    /// it (`readerIndex` 5 of a slice that starts at the prefix): a proxy that passes the message on unchanged then
    /// frames it with no copy (``framedMessage(_:compressed:allocator:)``).
    public mutating func next() throws(Failure) -> FramedMessage? {
        guard buffer != nil else { return nil }
        if pending == nil {
            let start = buffer!.readerIndex
            guard buffer!.readableBytes >= 5,
                let flag = buffer!.getInteger(at: start, as: UInt8.self),
                let length = buffer!.getInteger(at: start + 1, endianness: .big, as: UInt32.self).map(Int.init)
            else { return nil }
            guard flag <= 1 else { throw .invalidFlag(flag) }
            guard length <= maxMessageSize else { throw .messageTooLarge(length: length, limit: maxMessageSize) }
            if var whole = buffer!.readSlice(length: 5 + length) {
                whole.moveReaderIndex(forwardBy: 5)
                if buffer!.readableBytes == 0 { buffer = nil }
                return FramedMessage(compressed: flag == 1, payload: whole)
            }
            buffer!.moveReaderIndex(forwardBy: 5)
            pending = (flag == 1, length)
        }
        guard let (compressed, length) = pending, let payload = buffer!.readSlice(length: length) else { return nil }
        pending = nil
        if buffer!.readableBytes == 0 { buffer = nil }
        return FramedMessage(compressed: compressed, payload: payload)
    }
}

/// Writes the 5-byte prefix and the payload of one message into `buffer`.
public func writeFramedMessage(_ payload: ByteBuffer, compressed: Bool, into buffer: inout ByteBuffer) {
    buffer.reserveCapacity(minimumWritableBytes: 5 + payload.readableBytes)
    buffer.writeInteger(compressed ? UInt8(1) : 0)
    buffer.writeInteger(UInt32(payload.readableBytes), endianness: .big)
    var payload = payload
    buffer.writeBuffer(&payload)
}
