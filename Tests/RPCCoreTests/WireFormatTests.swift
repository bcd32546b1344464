import HabitFlowBase64
import HabitFlowCompression
import HabitFlowLocking
import HabitFlowRPC
import NIOCore
import Testing

@Suite("gRPC wire formats")
struct WireFormatTests {
    @Test("grpc-timeout parses every unit and refuses malformed values")
    func timeouts() {
        #expect(GRPCTimeout.parse("1000000u") == .seconds(1))  // what grpc-go sends for 1 s
        #expect(GRPCTimeout.parse("0n") == .zero)
        #expect(GRPCTimeout.parse("2H") == .seconds(7200))
        #expect(GRPCTimeout.parse("3M") == .seconds(180))
        #expect(GRPCTimeout.parse("250m") == .milliseconds(250))
        #expect(GRPCTimeout.parse("99999999S") == .seconds(99_999_999))
        for bad in ["", "S", "123456789S", "12x", "-1S", "1.5S", "1 S"] {
            #expect(GRPCTimeout.parse(bad) == nil, "\(bad)")
        }
        #expect(GRPCTimeout.format(.seconds(1)) == "1000000u")
        #expect(GRPCTimeout.parse(GRPCTimeout.format(.milliseconds(1500))) == .milliseconds(1500))
        #expect(GRPCTimeout.format(.seconds(-3)) == "0n")
    }

    @Test("grpc-message percent-encoding round-trips the interop special message; decoding never fails")
    func percentEncoding() {
        let special = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
        let encoded = PercentEncoding.encode(special)
        #expect(encoded.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E })
        #expect(PercentEncoding.decode(encoded) == special)
        #expect(PercentEncoding.encode("100%") == "100%25")
        #expect(PercentEncoding.decode("bad %zz and %4") == "bad %zz and %4")
    }

    @Test("base64 for -bin metadata: padded and unpadded in, unpadded out, garbage refused")
    func base64() {
        #expect(Base64.encode([0xFF, 0x00, 0x10], padding: false) == "/wAQ")
        #expect(Base64.encode([1], padding: false) == "AQ")
        #expect(Base64.encode([1]) == "AQ==")
        #expect(Base64.decode("AQ==") == [1])
        #expect(Base64.decode("AQ") == [1])
        #expect(Base64.decode("A") == nil)
        #expect(Base64.decode("A*==") == nil)
        var metadata = Metadata()
        metadata.addReceived(name: "x-trace-bin", value: "AQ==, AgM")
        #expect(metadata.values("x-trace-bin") == [.binary([1]), .binary([2, 3])])
        #expect(metadata.headerFields.map(\.value) == ["AQ", "AgM"])
    }

    @Test("gzip round-trips and refuses bombs and garbage")
    func gzip() throws {
        let original = ByteBuffer(bytes: Array(repeating: UInt8(ascii: "a"), count: 100_000) + [1, 2, 3])
        let compressed = Gzip.compress(original)
        #expect(compressed.readableBytes < 1_000)
        #expect(try Gzip.decompress(compressed, limit: 200_000) == original)
        #expect(throws: Gzip.Failure.tooLarge(limit: 50_000)) { try Gzip.decompress(compressed, limit: 50_000) }
        #expect {
            try Gzip.decompress(ByteBuffer(bytes: [1, 2, 3, 4, 5]), limit: 100)
        } throws: { if case .corrupt = $0 as? Gzip.Failure { true } else { false } }
        var truncated = compressed
        truncated.moveWriterIndex(to: compressed.writerIndex - 10)
        #expect {
            try Gzip.decompress(truncated, limit: 200_000)
        } throws: { if case .corrupt = $0 as? Gzip.Failure { true } else { false } }
    }
}

@Suite("server interceptors")
struct InterceptorOrderTests {
    struct Recording: ServerInterceptor {
        let name: String
        let log: Log
        func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
            log.append("\(name) in")
            try await next()
            log.append("\(name) out")
        }
    }

    final class Log: Sendable {
        private let storage = Locked<[String]>([])
        var entries: [String] { storage.withLock { $0 } }
        func append(_ entry: String) { storage.withLock { $0.append(entry) } }
    }

    @Test("the first interceptor is outermost, and the handler runs inside all of them")
    func order() async throws {
        let log = Log()
        let interceptors: [any ServerInterceptor] = [Recording(name: "a", log: log), Recording(name: "b", log: log)]
        let context = ServerContext(
            method: MethodDescriptor(service: "s", method: "m"), requestMetadata: [:], deadline: nil, peer: "test")
        try await interceptors.run(context: context) { log.append("handler") }
        #expect(log.entries == ["a in", "b in", "handler", "b out", "a out"])
    }
}
