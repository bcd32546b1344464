internal import CZlib
public import NIOCore

/// gzip (RFC 1952) compression of whole messages, for gRPC's `grpc-encoding: gzip`.
public enum Gzip {
    public enum Failure: Error, Sendable, Equatable {
        /// Decompressing would produce more than the allowed number of bytes (a compression bomb, or simply too big).
        case tooLarge(limit: Int)
        /// The input is not valid gzip data.
        case corrupt(String)
    }

    /// Compresses `input` into a gzip member.
    public static func compress(_ input: ByteBuffer, level: Int32 = 6) -> ByteBuffer {
        var stream = z_stream()
        precondition(habitflow_deflate_init_gzip(&stream, level) == Z_OK, "zlib could not initialise deflate")
        defer { deflateEnd(&stream) }

        let bound = Int(deflateBound(&stream, UInt(input.readableBytes))) + 32
        var output = ByteBufferAllocator().buffer(capacity: bound)
        _ = input.withUnsafeReadableBytes { source in
            output.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { destination in
                stream.next_in = UnsafeMutablePointer(mutating: source.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = UInt32(source.count)
                stream.next_out = destination.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = UInt32(destination.count)
                // With deflateBound's room, one Z_FINISH call always completes.
                let result = deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "zlib deflate did not finish within deflateBound")
                return destination.count - Int(stream.avail_out)
            }
        }
        return output
    }

    /// Decompresses one gzip member, refusing to produce more than `limit` bytes.
    public static func decompress(_ input: ByteBuffer, limit: Int) throws(Failure) -> ByteBuffer {
        var stream = z_stream()
        guard habitflow_inflate_init_gzip(&stream) == Z_OK else { throw .corrupt("zlib could not initialise inflate") }
        defer { inflateEnd(&stream) }

        var output = ByteBufferAllocator().buffer(capacity: min(max(input.readableBytes * 4, 256), limit + 1))
        var outcome: Failure?
        input.withUnsafeReadableBytes { source in
            stream.next_in = UnsafeMutablePointer(mutating: source.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = UInt32(source.count)
            while true {
                let room = min(max(output.writableBytes, 4096), limit + 1 - output.readableBytes)
                var result: Int32 = Z_OK
                output.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { destination in
                    stream.next_out = destination.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = UInt32(room)
                    result = inflate(&stream, Z_NO_FLUSH)
                    return room - Int(stream.avail_out)
                }
                if output.readableBytes > limit {
                    outcome = .tooLarge(limit: limit)
                    return
                }
                switch result {
                case Z_STREAM_END:
                    if stream.avail_in != 0 { outcome = .corrupt("trailing bytes after the gzip member") }
                    return
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    outcome = .corrupt("truncated gzip data")
                    return
                case Z_BUF_ERROR:
                    continue
                default:
                    outcome = .corrupt(stream.msg.map { String(cString: $0) } ?? "inflate error \(result)")
                    return
                }
            }
        }
        if let outcome { throw outcome }
        return output
    }
}
