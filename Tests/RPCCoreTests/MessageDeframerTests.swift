import HabitFlowRPC
import NIOCore
import Testing

/// A small deterministic generator, so a failing case can be replayed from its seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Length-Prefixed-Message deframing")
struct MessageDeframerTests {
    func framed(_ payloads: [[UInt8]], compressedEvery: Int = 0) -> ByteBuffer {
        var buffer = ByteBuffer()
        for (index, payload) in payloads.enumerated() {
            let compressed = compressedEvery > 0 && index % compressedEvery == 0
            writeFramedMessage(ByteBuffer(bytes: payload), compressed: compressed, into: &buffer)
        }
        return buffer
    }

    @Test("any split of the byte stream yields the same messages (seeded property test)", arguments: 0..<200)
    func randomChunking(seed: UInt64) throws {
        var random = SeededGenerator(state: seed)
        let payloads = (0..<Int.random(in: 0...12, using: &random)).map { _ in
            (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        var wire = framed(payloads, compressedEvery: 3)
        var deframer = MessageDeframer(maxMessageSize: 1024)
        var received: [FramedMessage] = []
        while wire.readableBytes > 0 {
            let chunk = wire.readSlice(length: min(wire.readableBytes, Int.random(in: 1...40, using: &random)))!
            deframer.append(chunk)
            while let message = try deframer.next() { received.append(message) }
        }
        #expect(received.map { Array($0.payload.readableBytesView) } == payloads, "seed \(seed)")
        #expect(received.enumerated().allSatisfy { $0.element.compressed == ($0.offset % 3 == 0) })
        #expect(deframer.isAtMessageBoundary)
    }

    @Test("several messages in one frame come out one by one")
    func severalInOneFrame() throws {
        var deframer = MessageDeframer(maxMessageSize: 100)
        deframer.append(framed([[1], [], [2, 3]]))
        #expect(try deframer.next().map { Array($0.payload.readableBytesView) } == [1])
        #expect(try deframer.next().map { Array($0.payload.readableBytesView) } == [])
        #expect(try deframer.next().map { Array($0.payload.readableBytesView) } == [2, 3])
        #expect(try deframer.next() == nil)
    }

    @Test("a message that arrived whole is framed again with no copy; another flag gets its own prefix")
    func passingAMessageOnReusesItsPrefix() throws {
        let wire = framed([[1, 2, 3], [4]])
        let original = Array(wire.readableBytesView)
        var deframer = MessageDeframer(maxMessageSize: 100)
        deframer.append(wire)
        let first = try #require(try deframer.next())
        let second = try #require(try deframer.next())
        #expect(Array(first.payload.readableBytesView) == [1, 2, 3])
        #expect(Array(second.payload.readableBytesView) == [4])

        // Passed on unchanged: the received prefix and bytes themselves, not a copy (same memory as the wire).
        let allocator = ByteBufferAllocator()
        let again = framedMessage(first.payload, compressed: false, allocator: allocator)
        #expect(Array(again.readableBytesView) == [0, 0, 0, 0, 3, 1, 2, 3])
        #expect(again.withUnsafeReadableBytes { $0.baseAddress } == wire.withUnsafeReadableBytes { $0.baseAddress })
        #expect(Array(framedMessage(second.payload, compressed: false, allocator: allocator).readableBytesView)
            == [0, 0, 0, 0, 1, 4])

        // Framed with another flag: a prefix of its own, and the received bytes stay as they were.
        let flagged = framedMessage(first.payload, compressed: true, allocator: allocator)
        #expect(Array(flagged.readableBytesView) == [1, 0, 0, 0, 3, 1, 2, 3])
        #expect(Array(wire.readableBytesView) == original)
        #expect(Array(first.payload.readableBytesView) == [1, 2, 3])
    }

    @Test("a payload whose prefix came in an earlier buffer is framed into a buffer of its own")
    func payloadWithoutItsPrefixIsCopied() throws {
        var wire = framed([[7, 8, 9]])
        var deframer = MessageDeframer(maxMessageSize: 100)
        deframer.append(wire.readSlice(length: 5)!)
        #expect(try deframer.next() == nil)
        deframer.append(wire.readSlice(length: 3)!)
        let message = try #require(try deframer.next())
        #expect(message.payload.readerIndex == 0)
        let again = framedMessage(message.payload, compressed: false, allocator: ByteBufferAllocator())
        #expect(Array(again.readableBytesView) == [0, 0, 0, 0, 3, 7, 8, 9])
    }

    @Test("an oversized length is refused as soon as the prefix is in, before the payload arrives")
    func oversizedBeforePayload() {
        var deframer = MessageDeframer(maxMessageSize: 4 << 20)
        var prefix = ByteBuffer()
        prefix.writeInteger(UInt8(0))
        prefix.writeInteger(UInt32(4 << 20) + 1)
        deframer.append(prefix)
        #expect(throws: MessageDeframer.Failure.messageTooLarge(length: (4 << 20) + 1, limit: 4 << 20)) {
            try deframer.next()
        }
    }

    @Test("a partial message is not at a boundary, and a bad flag byte is an error")
    func truncatedAndBadFlag() throws {
        var deframer = MessageDeframer(maxMessageSize: 100)
        var wire = framed([[1, 2, 3, 4]])
        deframer.append(wire.readSlice(length: 7)!)
        #expect(try deframer.next() == nil)
        #expect(!deframer.isAtMessageBoundary)

        var bad = MessageDeframer(maxMessageSize: 100)
        bad.append(ByteBuffer(bytes: [7, 0, 0, 0, 0]))
        #expect(throws: MessageDeframer.Failure.invalidFlag(7)) { try bad.next() }
    }
}
