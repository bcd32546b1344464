internal import CZlib
public import NIOCore

/// Raw deflate (RFC 1951, no zlib or gzip wrapper) as a stream: input in pieces, compressed output as zlib makes it.
///
/// For formats that frame deflate data themselves, such as a ZIP entry (method 8). zlib keeps a window and a block
/// of symbols of its own (about 256 KiB of state at memory level 8), and emits output a block at a time: most calls
/// to ``compress(_:into:)`` append nothing, and one now and then appends a block (at most 64 KiB, the size of zlib's
/// pending buffer, for input pieces of up to 16 KiB). ``finish(into:)`` ends the deflate stream and resets zlib, so one
/// `DeflateStream` compresses any number of entries, one after another.
///
/// It owns zlib's state (at a stable address, freed by `deinit`), so it cannot be copied; it is not `Sendable`, one
/// owner drives it.
public struct DeflateStream: ~Copyable {
    private let stream: UnsafeMutablePointer<z_stream>

    /// The bytes of output appended when more output is due and the buffer has no room.
    private static let outputStep = 16 * 1024

    /// Starts a raw deflate stream at zlib's compression `level`: 0 (stored) to 9 (smallest), or -1 for zlib's
    /// default (6).
    public init(level: Int32 = 6) {
        precondition((-1...9).contains(level), "zlib compression level \(level) is not within -1...9")
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let result = habitflow_deflate_init_raw(stream, level)
        precondition(result == Z_OK, "zlib could not initialise deflate (\(result))")
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Compresses `input`, appending to `output` whatever compressed data zlib has ready (often nothing yet).
    public mutating func compress(_ input: some Collection<UInt8>, into output: inout ByteBuffer) {
        withContiguousBytes(of: input) { run($0, flush: Z_NO_FLUSH, into: &output) }
    }

    /// Compresses the readable bytes of `input` (without moving its reader index), appending to `output` whatever
    /// compressed data zlib has ready.
    public mutating func compress(_ input: ByteBuffer, into output: inout ByteBuffer) {
        input.withUnsafeReadableBytes { run($0, flush: Z_NO_FLUSH, into: &output) }
    }

    /// Ends the deflate stream: appends the rest of the compressed data (the final block) to `output`, then resets, so
    /// the next ``compress(_:into:)`` starts a new, independent stream.
    public mutating func finish(into output: inout ByteBuffer) {
        run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH, into: &output)
        let result = deflateReset(stream)
        precondition(result == Z_OK, "zlib could not reset deflate (\(result))")
    }

    /// Feeds `input` to zlib with `flush` until it is consumed and zlib has nothing more to give (for `Z_FINISH`:
    /// until the stream ends).
    private mutating func run(_ input: UnsafeRawBufferPointer, flush: Int32, into output: inout ByteBuffer) {
        var remaining = input
        repeat {
            // avail_in is 32 bits: feed a larger input in pieces.
            let piece = UnsafeRawBufferPointer(rebasing: remaining.prefix(1 << 30))
            remaining = UnsafeRawBufferPointer(rebasing: remaining.dropFirst(piece.count))
            let last = remaining.isEmpty
            if piece.isEmpty && flush == Z_NO_FLUSH { return }
            stream.pointee.next_in = UnsafeMutablePointer(mutating: piece.bindMemory(to: Bytef.self).baseAddress)
            stream.pointee.avail_in = UInt32(piece.count)
            let pieceFlush = last ? flush : Z_NO_FLUSH
            var result = Z_OK
            repeat {
                output.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.outputStep) { destination in
                    let room = min(destination.count, Int(UInt32.max))
                    stream.pointee.next_out = destination.bindMemory(to: Bytef.self).baseAddress
                    stream.pointee.avail_out = UInt32(room)
                    result = deflate(stream, pieceFlush)
                    return room - Int(stream.pointee.avail_out)
                }
                // Z_BUF_ERROR only means "no progress possible" (nothing left to do); anything else is a broken state.
                precondition(
                    result == Z_OK || result == Z_STREAM_END || result == Z_BUF_ERROR,
                    "zlib deflate failed (\(result))")
                // A full output buffer may mean more is pending; Z_FINISH is done only at the end of the stream.
            } while stream.pointee.avail_out == 0 || (pieceFlush == Z_FINISH && result != Z_STREAM_END)
            stream.pointee.next_in = nil
        } while !remaining.isEmpty
    }
}

/// zlib's CRC-32 (ISO-HDLC: the checksum of ZIP, gzip and PNG), computed over bytes given in pieces.
public struct CRC32: Hashable, Sendable {
    /// The checksum of the bytes so far (0 for none).
    public private(set) var value: UInt32 = 0

    public init() {}

    /// Adds `bytes` to the checksum.
    public mutating func update(_ bytes: some Collection<UInt8>) {
        withContiguousBytes(of: bytes) { add($0) }
    }

    /// Adds the readable bytes of `buffer` to the checksum (without moving its reader index).
    public mutating func update(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { add($0) }
    }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }

    private mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var remaining = bytes
        var crc = UInt(value)
        while !remaining.isEmpty {
            // zlib's length is 32 bits: checksum a larger input in pieces.
            let piece = UnsafeRawBufferPointer(rebasing: remaining.prefix(1 << 30))
            crc = crc32(crc, piece.bindMemory(to: Bytef.self).baseAddress, UInt32(piece.count))
            remaining = UnsafeRawBufferPointer(rebasing: remaining.dropFirst(piece.count))
        }
        value = UInt32(truncatingIfNeeded: crc)
    }
}

/// Calls `body` with `bytes` as one contiguous buffer, copying them only when the collection has no contiguous storage
/// (arrays, `Data`, `String.UTF8View` and their slices have).
private func withContiguousBytes<Result>(
    of bytes: some Collection<UInt8>, _ body: (UnsafeRawBufferPointer) -> Result
) -> Result {
    if let result = bytes.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
    return Array(bytes).withUnsafeBytes(body)
}
