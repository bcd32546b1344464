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
