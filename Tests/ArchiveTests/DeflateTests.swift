import Foundation
import HabitFlowCompression
import NIOCore
import Testing

@Suite("zlib: raw deflate stream and CRC-32")
struct DeflateTests {
    @Test("CRC-32 matches its published check values, whole or in pieces")
    func crc32Vectors() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32().value == 0)
        let fox = Array("The quick brown fox jumps over the lazy dog".utf8)
        #expect(CRC32.checksum(fox) == 0x414F_A339)

        var pieces = CRC32()
        pieces.update(fox[..<10])
        pieces.update("".utf8)
        pieces.update(fox[10...].lazy.map { $0 })  // not contiguous: copied
        #expect(pieces.value == 0x414F_A339)

        var buffer = ByteBuffer(string: "xx123456789")
        buffer.moveReaderIndex(forwardBy: 2)
        var fromBuffer = CRC32()
        fromBuffer.update(buffer)
        #expect(fromBuffer.value == 0xCBF4_3926)
        #expect(buffer.readableBytes == 9)
    }

    @Test("compressed in pieces, each stream inflates with Python's zlib (wbits -15) to the input, byte for byte")
    func roundTripThroughPython() async throws {
        let folder = try ScratchFolder("deflate")
        defer { folder.remove() }
        var random = TestRandom(seed: 26)
        let text = (0..<40_000).map { "\($0),habit-\($0 % 17),2026-11-\($0 % 28 + 1),true,note \($0 * 7919)\r\n" }
            .joined()
        let inputs: [[UInt8]] = [
            [],
            Array("a".utf8),
            Array("héllo, wörld 😀 ".utf8) + Array(repeating: UInt8(ascii: "z"), count: 100_000),
            Array(text.utf8) + random.bytes(500_000),
        ]

        // One stream object for all inputs: finish resets it, so each output is a stream of its own.
        var deflater = DeflateStream()
        var sawOutputBeforeFinish = false
        for (index, input) in inputs.enumerated() {
            var output = ByteBuffer()
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + 1 + random.below(9000))
                if index % 2 == 0 {
                    deflater.compress(input[offset..<end], into: &output)
                } else {
                    deflater.compress(ByteBuffer(bytes: input[offset..<end]), into: &output)
                }
                offset = end
            }
            sawOutputBeforeFinish = sawOutputBeforeFinish || output.readableBytes > 0
            deflater.finish(into: &output)
            #expect(output.readableBytes > 0)
            try Data(output.readableBytesView).write(to: URL(fileURLWithPath: folder.path("\(index).deflate")))
        }
        // Output comes as zlib produces it, not all at the end.
        #expect(sawOutputBeforeFinish)

        let script = """
            import sys, zlib
            for path in sys.argv[1:]:
                data = open(path, "rb").read()
                inflater = zlib.decompressobj(-15)
                plain = inflater.decompress(data)
                assert inflater.eof and not inflater.unused_data, path
                open(path + ".out", "wb").write(plain)
            """
        _ = try await python(script, inputs.indices.map { folder.path("\($0).deflate") })
        for (index, input) in inputs.enumerated() {
            let inflated = try Data(contentsOf: URL(fileURLWithPath: folder.path("\(index).deflate.out")))
            #expect(Array(inflated) == input, "input \(index)")
        }
    }

    @Test("incompressible data grows only by deflate's stored-block overhead; repetitive data shrinks")
    func compressionSizes() {
        var random = TestRandom(seed: 7)
        let noise = random.bytes(1 << 20)
        var deflater = DeflateStream(level: 9)
        var output = ByteBuffer()
        deflater.compress(noise, into: &output)
        deflater.finish(into: &output)
        #expect(output.readableBytes <= noise.count + 5 * (noise.count / 16_000 + 1))

        var zeros = ByteBuffer()
        deflater.compress([UInt8](repeating: 0, count: 1 << 20), into: &zeros)
        deflater.finish(into: &zeros)
        #expect(zeros.readableBytes < 2000)
    }
}
