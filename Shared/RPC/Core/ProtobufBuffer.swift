public import NIOCore
internal import SwiftProtobuf

/// Lets swift-protobuf parse from and serialize into a `ByteBuffer` without intermediate arrays.
///
/// Serializing through it leaves ``framingHeadroom`` bytes in front of the message, so the transport can write the
/// gRPC length prefix there instead of copying the message into a new buffer.
struct ProtobufBuffer: SwiftProtobufContiguousBytes {
    var buffer: ByteBuffer

    init(_ buffer: ByteBuffer) {
        self.buffer = buffer
    }

    /// swift-protobuf calls this with the exact serialized size, then fills the bytes in place.
    init(repeating value: UInt8, count: Int) {
        var buffer = ByteBufferAllocator().buffer(capacity: framingHeadroom + count)
        buffer.writeRepeatingByte(0, count: framingHeadroom)
        buffer.writeRepeatingByte(value, count: count)
        buffer.moveReaderIndex(forwardBy: framingHeadroom)
        self.buffer = buffer
    }

    init<S: Sequence>(_ sequence: S) where S.Element == UInt8 {
        buffer = ByteBuffer(bytes: sequence)
    }

    var count: Int { buffer.readableBytes }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeReadableBytes(body)
    }

    mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeMutableReadableBytes(body)
    }
}

/// Bytes reserved in front of a serialized message for the 5-byte gRPC message prefix.
public let framingHeadroom = 5

/// Frames `payload` as one Length-Prefixed-Message. When the payload has headroom in front of it (as serialized
/// messages do), the prefix is written there and nothing is copied. A received message passed on unchanged
/// (``MessageDeframer/next()``) already has this very prefix in front: it is used as it is, without a write, so the
/// received bytes are not copied either, even while something else still holds them.
public func framedMessage(_ payload: ByteBuffer, compressed: Bool, allocator: ByteBufferAllocator) -> ByteBuffer {
    var payload = payload
    let length = payload.readableBytes
    if payload.readerIndex >= framingHeadroom {
        let start = payload.readerIndex - framingHeadroom
        let flag: UInt8 = compressed ? 1 : 0
        payload.moveReaderIndex(to: start)
        if payload.getInteger(at: start, as: UInt8.self) != flag
            || payload.getInteger(at: start + 1, endianness: .big, as: UInt32.self) != UInt32(length)
        {
            payload.setInteger(flag, at: start)
            payload.setInteger(UInt32(length), at: start + 1, endianness: .big)
        }
        return payload
    }
    var framed = allocator.buffer(capacity: framingHeadroom + length)
    writeFramedMessage(payload, compressed: compressed, into: &framed)
    return framed
}
