import Foundation
import GRPCInteropTesting
import HabitFlowRPC
import HabitFlowRPCClient
import Testing

/// A grpcio server of grpc.testing.TestService (Tests/Interop/grpcio_test_server.py, Debian python3-grpcio) in a
/// child process: a server we did not write.
final class GRPCIOTestServer: Sendable {
    let process: Process
    let stdin: Pipe
    let port: Int

    static func start() async throws -> GRPCIOTestServer {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Interop/grpcio_test_server.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script.path, "--port", "0"]
        process.environment = ProcessInfo.processInfo.environment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 }
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        // The first line names the port; read it on a thread of its own (a blocking read).
        let line: String = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                var bytes: [UInt8] = []
                while true {
                    let chunk = stdout.fileHandleForReading.readData(ofLength: 1)
                    guard let byte = chunk.first else { break }
                    if byte == UInt8(ascii: "\n") { break }
                    bytes.append(byte)
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
        guard line.hasPrefix("listening on "), let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.terminate()
            throw RPCError(.unavailable, "the grpcio server did not start: \(line)")
        }
        return GRPCIOTestServer(process: process, stdin: stdin, port: port)
    }

    private init(process: Process, stdin: Pipe, port: Int) {
        self.process = process
        self.stdin = stdin
        self.port = port
    }

    func stop() {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}

/// The client-side interop cases of grpc/grpc doc/interop-test-descriptions.md, our client against grpcio.
@Suite(.serialized)
struct GRPCIOInteropTests {
    @Test func interopCasesAgainstGRPCIO() async throws {
        let server = try await GRPCIOTestServer.start()
        defer { server.stop() }
        let channel = try makeChannel(ports: [server.port])
        let client = Grpc_Testing_TestService.Client(transport: channel)

        // empty_unary
        _ = try await client.emptyCall(.init())

        // large_unary
        let large = try await client.unaryCall(
            .with {
                $0.responseSize = 314_159
                $0.payload = .with { $0.body = Data(count: 271_828) }
            })
        #expect(large.payload.body.count == 314_159)

        // client_compressed_unary (the server takes gzip requests) and server_compressed_unary
        let compressed = try await client.unaryCall(
            .with {
                $0.responseSize = 314_159
                $0.responseCompressed = .with { $0.value = true }
                $0.payload = .with { $0.body = Data(count: 271_828) }
            }, options: CallOptions(compression: .gzip))
        #expect(compressed.payload.body.count == 314_159)

        // client_streaming
        let uploads = [27182, 8, 1828, 45904].map { size in
            Grpc_Testing_StreamingInputCallRequest.with { $0.payload = .with { $0.body = Data(count: size) } }
        }
        #expect(try await client.streamingInputCall(requests: AsyncArray(uploads)).aggregatedPayloadSize == 74922)

        // server_streaming
        let sizes: [Int32] = [31415, 9, 2653, 58979]
        var received: [Int] = []
        for try await message in try await client.streamingOutputCall(
            .with { $0.responseParameters = sizes.map { size in .with { $0.size = size } } })
        {
            received.append(message.payload.body.count)
        }
        #expect(received == sizes.map(Int.init))

        // ping_pong
        let (requests, continuation) = requestStream(of: Grpc_Testing_StreamingOutputCallRequest.self)
        let responses = try await client.fullDuplexCall(requests: requests)
        var iterator = responses.makeAsyncIterator()
        for (requestSize, responseSize) in zip([27182, 8, 1828, 45904], [31415, 9, 2653, 58979]) {
            continuation.yield(
                .with {
                    $0.responseParameters = [.with { $0.size = Int32(responseSize) }]
                    $0.payload = .with { $0.body = Data(count: requestSize) }
                })
            #expect(try await iterator.next()?.payload.body.count == responseSize)
        }
        continuation.finish()
        #expect(try await iterator.next() == nil)

        // empty_stream
        var emptyCount = 0
        for try await _ in try await client.fullDuplexCall(requests: AsyncArray<Grpc_Testing_StreamingOutputCallRequest>([])) {
            emptyCount += 1
        }
        #expect(emptyCount == 0)

        // custom_metadata (unary and full duplex)
        var options = CallOptions()
        options.metadata.add("x-grpc-test-echo-initial", "test_initial_metadata_value")
        options.metadata.add("x-grpc-test-echo-trailing-bin", binary: [0xAB, 0xAB, 0xAB])
        let withMetadata = try await client.unaryCallWithMetadata(.with { $0.responseSize = 314_159 }, options: options)
        #expect(withMetadata.initialMetadata["x-grpc-test-echo-initial"] == "test_initial_metadata_value")
        #expect(withMetadata.trailers.binary("x-grpc-test-echo-trailing-bin") == [0xAB, 0xAB, 0xAB])
        let duplex = try await client.fullDuplexCall(
            requests: AsyncArray([Grpc_Testing_StreamingOutputCallRequest.with { $0.responseParameters = [.with { $0.size = 1 }] }]),
            options: options)
        #expect(try await duplex.initialMetadata()["x-grpc-test-echo-initial"] == "test_initial_metadata_value")
        for try await _ in duplex {}
        #expect(duplex.trailers.binary("x-grpc-test-echo-trailing-bin") == [0xAB, 0xAB, 0xAB])

        // status_code_and_message and special_status_message
        for message in ["test status message", "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"] {
            let error = await #expect(throws: RPCError.self) {
                _ = try await client.unaryCall(.with { $0.responseStatus = .with { $0.code = 2; $0.message = message } })
            }
            #expect(error?.code == .unknown && error?.message == message)
        }

        // unimplemented_method and unimplemented_service
        let unimplemented = await #expect(throws: RPCError.self) { _ = try await client.unimplementedCall(.init()) }
        #expect(unimplemented?.code == .unimplemented)
        let unknownService = await #expect(throws: RPCError.self) {
            _ = try await Grpc_Testing_UnimplementedService.Client(transport: channel).unimplementedCall(.init())
        }
        #expect(unknownService?.code == .unimplemented)

        // cancel_after_first_response
        let cancelled = try await client.fullDuplexCall(
            requests: AsyncArray([Grpc_Testing_StreamingOutputCallRequest.with { $0.responseParameters = [.with { $0.size = 31415 }] }]) .withDelay())
        var cancelIterator = cancelled.makeAsyncIterator()
        #expect(try await cancelIterator.next()?.payload.body.count == 31415)
        cancelled.cancel()
        let afterCancel = await #expect(throws: RPCError.self) { _ = try await cancelIterator.next() }
        #expect(afterCancel?.code == .cancelled)

        // timeout_on_sleeping_server
        let timedOut = await #expect(throws: RPCError.self) {
            for try await _ in try await client.fullDuplexCall(
                requests: AsyncArray([Grpc_Testing_StreamingOutputCallRequest.with {
                    $0.responseParameters = [.with { $0.size = 1; $0.intervalUs = 2_000_000 }]
                }]).withDelay(),
                options: CallOptions(timeout: .milliseconds(10)))
            {}
        }
        #expect(timedOut?.code == .deadlineExceeded)

        await channel.close()
    }
}

extension AsyncArray {
    /// The elements, then a sequence that never ends (keeps the request side open).
    func withDelay() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        for element in elements { continuation.yield(element) }
        return stream
    }
}
