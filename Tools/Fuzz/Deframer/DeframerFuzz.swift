internal import HabitFlowCompression
internal import HabitFlowFuzzSupport
internal import HabitFlowRPC
internal import NIOCore

// The gRPC message deframer (`MessageDeframer`), fed a stream of DATA bytes cut into pieces of sizes the input
// chooses, checked against a reference that parses the whole stream at once: the same messages, the same failure,
// the same leftover, however the bytes were cut. Each message re-framed with `framedMessage` must be the bytes it
// came in, and a compressed one goes through gzip as the server's does.
//
// Input: 1 byte picks the size limit, 1 byte the number n (0-7) of piece sizes, n bytes the sizes (each + 1,
// used in turn; n = 0: one piece), then the stream.

private let limits = [0, 1, 4, 5, 16, 255, 4096, 65_536, 4 << 20]
private let decompressedLimit = 64 << 10

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.writeSeedsIfAsked(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let limit = input.pick(limits)
    let pieceSizes = input.bytes(Int(input.byte() % 8)).map { Int($0) + 1 }
    let stream = input.rest()

    let expected = Reference(stream, limit: limit)
    var deframer = MessageDeframer(maxMessageSize: limit)
    var messages: [FramedMessage] = []
    var failure: MessageDeframer.Failure?
    var offset = 0
    var piece = 0
    feeding: while offset < stream.count {
        let size = pieceSizes.isEmpty ? stream.count : pieceSizes[piece % pieceSizes.count]
        let length = min(size, stream.count - offset)
        piece += 1
        deframer.append(ByteBuffer(bytes: stream[offset..<(offset + length)]))
        offset += length
        do throws(MessageDeframer.Failure) {
            while let message = try deframer.next() { messages.append(message) }
        } catch {
            failure = error
            break feeding
        }
    }

    expect(
        failure == expected.failure,
        "failure \(String(describing: failure)), expected \(String(describing: expected.failure))")
    expect(messages.count == expected.messages.count, "\(messages.count) messages, expected \(expected.messages.count)")
    for (message, (compressed, payload, framed)) in zip(messages, expected.messages) {
        expect(message.compressed == compressed, "compressed flag differs")
        expect(Array(message.payload.readableBytesView) == payload, "payload differs")
        let reframed = framedMessage(message.payload, compressed: message.compressed, allocator: ByteBufferAllocator())
        expect(Array(reframed.readableBytesView) == framed, "framedMessage is not the received message")
        var written = ByteBuffer()
        writeFramedMessage(message.payload, compressed: message.compressed, into: &written)
        expect(Array(written.readableBytesView) == framed, "writeFramedMessage is not the received message")
        if message.compressed { checkGzip(message.payload) }
    }
    if failure == nil {
        expect(deframer.isAtMessageBoundary == expected.endsAtBoundary, "isAtMessageBoundary differs")
    }
    return 0
}

/// What the server does with a compressed message: decompress under the size limit. What comes out must compress
/// and decompress back to itself.
private func checkGzip(_ payload: ByteBuffer) {
    guard let plain = try? Gzip.decompress(payload, limit: decompressedLimit) else { return }
    expect(plain.readableBytes <= decompressedLimit, "decompressed past the limit")
    let again = try? Gzip.decompress(Gzip.compress(plain), limit: decompressedLimit)
    expect(again == plain, "gzip round trip differs")
}

/// The stream parsed in one go, the simplest way: prefixes and payloads until the bytes run out or a prefix is bad.
private struct Reference {
    var messages: [(compressed: Bool, payload: [UInt8], framed: [UInt8])] = []
    var failure: MessageDeframer.Failure?
    var endsAtBoundary = true

    init(_ stream: [UInt8], limit: Int) {
        var offset = 0
        while stream.count - offset >= 5 {
            let flag = stream[offset]
            let length = stream[(offset + 1)..<(offset + 5)].reduce(0) { $0 << 8 | Int($1) }
            if flag > 1 {
                failure = .invalidFlag(flag)
                return
            }
            if length > limit {
                failure = .messageTooLarge(length: length, limit: limit)
                return
            }
            guard stream.count - offset - 5 >= length else { break }
            let end = offset + 5 + length
            messages.append((flag == 1, Array(stream[(offset + 5)..<end]), Array(stream[offset..<end])))
            offset += 5 + length
        }
        endsAtBoundary = offset == stream.count
    }
}

private func seeds() -> [String: [UInt8]] {
    func framed(_ payload: [UInt8], compressed: Bool = false) -> [UInt8] {
        [compressed ? 1 : 0] + withUnsafeBytes(of: UInt32(payload.count).bigEndian, Array.init) + payload
    }
    func input(limit: Int, pieces: [UInt8], _ stream: [UInt8]) -> [UInt8] {
        var builder = FuzzInputBuilder()
        builder.pick(limit, in: limits)
        builder.byte(UInt8(pieces.count))
        builder.bytes(pieces.map { $0 - 1 })
        builder.bytes(stream)
        return builder.bytes
    }
    let hello = Array("hello, habit".utf8)
    let plain = ByteBuffer(bytes: Array(repeating: UInt8(ascii: "a"), count: 300))
    let gzipped = Array(Gzip.compress(plain).readableBytesView)
    return [
        "empty-message": input(limit: 4 << 20, pieces: [], framed([])),
        "one-message": input(limit: 4 << 20, pieces: [], framed(hello)),
        "two-messages-byte-by-byte": input(limit: 4 << 20, pieces: [1], framed(hello) + framed([0x08, 0x96, 0x01])),
        "split-prefix": input(limit: 4096, pieces: [3, 4, 200], framed(hello) + framed(hello) + framed([])),
        "gzip-message": input(limit: 65_536, pieces: [7, 1], framed(gzipped, compressed: true)),
        "too-large": input(limit: 16, pieces: [2], framed(Array(repeating: 1, count: 17))),
        "bad-flag": input(limit: 4096, pieces: [], [2, 0, 0, 0, 1, 0]),
        "truncated": input(limit: 4096, pieces: [5], Array(framed(hello).dropLast(3))),
    ]
}
