import HabitFlowBase64
import HabitFlowGRPCProtos
import HabitFlowHTTP2
import HabitFlowRPC
import HabitFlowRPCServer
import Logging
import NIOCore
import NIOPosix
import SwiftProtobuf
import HabitFlowLocking
import Testing
import Foundation

/// What the handlers under test saw, for assertions about the server side.
final class Probe: Sendable {
    private let entries = Locked<[String]>([])
    private let counter = Locked(0)

    func record(_ entry: String) { entries.withLock { $0.append(entry) } }
    var recorded: [String] { entries.withLock { $0 } }
    func increment() { counter.withLock { $0 += 1 } }
    var count: Int { counter.withLock { $0 } }

    /// Waits (up to `timeout`) until `entry` was recorded.
    func waitFor(_ entry: String, timeout: Duration = .seconds(5)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if recorded.contains(entry) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}

/// A small service of probes, written against the core API directly (no generated code).
struct ProbeService: RPCService {
    let probe: Probe
    var serviceName: String { "test.Probe" }

    static func method(_ name: String) -> MethodDescriptor { MethodDescriptor(service: "test.Probe", method: name) }

    var methods: [ServerMethod] {
        let probe = self.probe
        return [
            .unary(Self.method("Echo")) { (request: Google_Protobuf_StringValue, context) in
                Google_Protobuf_StringValue(request.value + " from \(context.requestMetadata["x-user"] ?? "nobody")")
            },
            .unary(Self.method("Sleep")) { (request: Google_Protobuf_Int64Value, context) in
                probe.record("sleep started")
                do {
                    try await Task.sleep(for: .milliseconds(request.value))
                } catch {
                    probe.record("sleep cancelled")
                    throw error
                }
                probe.record("sleep finished")
                return Google_Protobuf_Empty()
            },
            .serverStreaming(Self.method("Flood")) {
                (request: Google_Protobuf_Int64Value, responses: ResponseWriter<Google_Protobuf_BytesValue>, _) in
                let chunk = Google_Protobuf_BytesValue(Data(repeating: 7, count: 64 << 10))
                for _ in 0..<request.value {
                    try await responses.write(chunk)
                    probe.increment()
                }
            },
            .unary(Self.method("Metadata")) { (_: Google_Protobuf_Empty, context) in
                // Every request metadata key the handler sees, in order, with its text value.
                Google_Protobuf_StringValue(
                    context.requestMetadata.map { "\($0.key)=\(context.requestMetadata[$0.key] ?? "")" }
                        .joined(separator: ";"))
            },
            .unary(Self.method("Fail")) { (_: Google_Protobuf_Empty, _) -> Google_Protobuf_Empty in
                var badRequest = Google_Rpc_BadRequest()
                badRequest.fieldViolations = [.with { $0.field = "name"; $0.description_p = "must not be empty" }]
                throw RPCError(.invalidArgument, "name: must not be empty ☹").addingDetail(badRequest)
            },
        ]
    }
}

/// Refuses calls without `x-user`, and stamps a request id on every response.
struct UserInterceptor: ServerInterceptor {
    func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        context.addInitialMetadata("x-request-id", "req-1")
        guard context.requestMetadata["x-user"] != nil else {
            throw RPCError(.unauthenticated, "x-user metadata is required")
        }
        try await next()
    }
}

func encoded(_ message: some SwiftProtobuf.Message) throws -> [UInt8] { try message.serializedBytes() }

func withServer<Result: Sendable>(
    probe: Probe, configure: (inout RPCServerConfiguration) -> Void = { _ in },
    _ body: (RPCServer, Int) async throws -> Result
) async throws -> Result {
    var configuration = RPCServerConfiguration(port: 0)
    configure(&configuration)
    let server = RPCServer(
        configuration: configuration, services: [ProbeService(probe: probe)], interceptors: [UserInterceptor()],
        logger: Logger(label: "test"))
    try await server.start()
    do {
        let result = try await body(server, server.localAddress!.port!)
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

@Suite("RPC server over real loopback connections")
struct RPCServerTests {
    @Test("interceptors read metadata, add response metadata, and can refuse a call before the handler runs")
    func interceptors() async throws {
        let probe = Probe()
        try await withServer(probe: probe) { _, port in
            try await TestConnection.with(port: port) { connection in
                let allowed = try await connection.startCall(path: "/test.Probe/Echo", extraHeaders: [("x-user", "ada")])
                try await connection.send(try encoded(Google_Protobuf_StringValue("hello")), streamID: allowed, end: true)
                let response = try await connection.response(streamID: allowed)
                #expect(response.status == 0)
                #expect(response.field("x-request-id") == "req-1")
                let reply = try Google_Protobuf_StringValue(serializedBytes: Array(response.messages.first!.readableBytesView))
                #expect(reply.value == "hello from ada")

                let refused = try await connection.startCall(path: "/test.Probe/Echo")
                try await connection.send(try encoded(Google_Protobuf_StringValue("hello")), streamID: refused, end: true)
                let denied = try await connection.response(streamID: refused)
                #expect(denied.status == RPCStatusCode.unauthenticated.rawValue)
                #expect(denied.trailers.isEmpty, "an error before any message is a Trailers-Only response")
                #expect(denied.field("x-request-id") == "req-1")
                #expect(denied.messages.isEmpty)
            }
        }
    }

    @Test("handlers see the client's own metadata, without pseudo-headers, content-type, te or reserved grpc-* fields")
    func requestMetadataLeavesOutTheProtocolsFields() async throws {
        let probe = Probe()
        try await withServer(probe: probe) { _, port in
            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(
                    path: "/test.Probe/Metadata",
                    extraHeaders: [
                        ("x-user", "ada"), ("grpc-timeout", "5S"), ("grpc-custom", "1"), ("go-ahead", "yes"),
                        ("content-language", "en"), ("tenant", "t1"), ("team", "blue"),
                    ])
                try await connection.send(try encoded(Google_Protobuf_Empty()), streamID: stream, end: true)
                let response = try await connection.response(streamID: stream)
                #expect(response.status == 0)
                let seen = try Google_Protobuf_StringValue(serializedBytes: Array(response.messages.first!.readableBytesView))
                #expect(seen.value == "x-user=ada;go-ahead=yes;content-language=en;tenant=t1;team=blue")
            }
        }
    }

    @Test("grpc-timeout cancels the handler and answers DEADLINE_EXCEEDED")
    func deadline() async throws {
        let probe = Probe()
        try await withServer(probe: probe) { _, port in
            try await TestConnection.with(port: port) { connection in
                let started = ContinuousClock.now
                let stream = try await startMinuteLongSleep(on: connection, grpcTimeout: "200m")
                let response = try await connection.response(streamID: stream)
                #expect(response.status == RPCStatusCode.deadlineExceeded.rawValue)
                #expect(ContinuousClock.now - started < .seconds(5))
                #expect(await probe.waitFor("sleep cancelled"))
            }
        }
    }

    @Test("calls on one connection each end at their own grpc-timeout, a later shorter one first")
    func deadlinesOfSeveralCalls() async throws {
        try await withServer(probe: Probe()) { _, port in
            try await TestConnection.with(port: port) { connection in
                let started = ContinuousClock.now
                let long = try await startMinuteLongSleep(on: connection, grpcTimeout: "2S")
                let short = try await startMinuteLongSleep(on: connection, grpcTimeout: "200m")
                let shortResponse = try await connection.response(streamID: short)
                #expect(shortResponse.status == RPCStatusCode.deadlineExceeded.rawValue)
                #expect(ContinuousClock.now - started < .milliseconds(1500))
                let longResponse = try await connection.response(streamID: long)
                #expect(longResponse.status == RPCStatusCode.deadlineExceeded.rawValue)
                let elapsed = ContinuousClock.now - started
                #expect(elapsed >= .milliseconds(1900) && elapsed < .seconds(5))
            }
        }
    }

    @Test("a client's RST_STREAM cancels the handler")
    func clientReset() async throws {
        let probe = Probe()
        try await withServer(probe: probe) { _, port in
            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(path: "/test.Probe/Sleep", extraHeaders: [("x-user", "ada")])
                try await connection.send(try encoded(Google_Protobuf_Int64Value(60_000)), streamID: stream, end: true)
                #expect(await probe.waitFor("sleep started"))
                try await connection.reset(stream)
                #expect(await probe.waitFor("sleep cancelled"))
                #expect(!probe.recorded.contains("sleep finished"))
            }
        }
    }

    @Test("a client that does not read holds a streaming writer back; memory stays bounded")
    func backPressure() async throws {
        let probe = Probe()
        try await withServer(probe: probe) { _, port in
            var clientConfiguration = HTTP2Configuration()
            clientConfiguration.manualFlowControl = true
            clientConfiguration.initialStreamWindowSize = 64 << 10
            clientConfiguration.connectionWindowSize = 64 << 10
            try await TestConnection.with(port: port, configuration: clientConfiguration) { connection in
                let messageCount = 120  // 120 × 64 KiB = 7.5 MiB if nothing held the writer back
                let stream = try await connection.startCall(path: "/test.Probe/Flood", extraHeaders: [("x-user", "ada")])
                try await connection.send(try encoded(Google_Protobuf_Int64Value(Int64(messageCount))), streamID: stream, end: true)
                try await Task.sleep(for: .milliseconds(500))
                // The window (64 KiB) plus the send queue's high watermark (1 MiB) bound what the writer got rid of.
                #expect(probe.count <= 20, "the handler wrote \(probe.count) messages to a client that reads nothing")

                let response = try await connection.response(streamID: stream, consume: true)
                #expect(response.status == 0)
                #expect(response.messages.count == messageCount)
                #expect(probe.count == messageCount)
            }
        }
    }

    @Test("status details travel in grpc-status-details-bin as google.rpc.Status; messages are percent-encoded")
    func statusDetails() async throws {
        try await withServer(probe: Probe()) { _, port in
            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(path: "/test.Probe/Fail", extraHeaders: [("x-user", "ada")])
                try await connection.send(try encoded(Google_Protobuf_Empty()), streamID: stream, end: true)
                let response = try await connection.response(streamID: stream)
                #expect(response.status == RPCStatusCode.invalidArgument.rawValue)
                #expect(response.field("grpc-message") == "name: must not be empty %E2%98%B9")
                let details = try #require(response.field("grpc-status-details-bin").flatMap { Base64.decode($0) })
                let status = try Google_Rpc_Status(serializedBytes: details)
                #expect(status.code == 3)
                let badRequest = try Google_Rpc_BadRequest(unpackingAny: try #require(status.details.first))
                #expect(badRequest.fieldViolations.first?.field == "name")
            }
        }
    }

    @Test("graceful shutdown: GOAWAY, the call in flight finishes, then the server is gone")
    func gracefulShutdown() async throws {
        let probe = Probe()
        var configuration = RPCServerConfiguration(port: 0)
        configuration.connectionManagement.gracePeriod = .seconds(5)
        let server = RPCServer(
            configuration: configuration, services: [ProbeService(probe: probe)], logger: Logger(label: "test"))
        try await server.start()
        let port = server.localAddress!.port!
        try await TestConnection.with(port: port) { connection in
            let stream = try await connection.startCall(path: "/test.Probe/Sleep", extraHeaders: [("x-user", "ada")])
            try await connection.send(try encoded(Google_Protobuf_Int64Value(1_500)), streamID: stream, end: true)
            #expect(await probe.waitFor("sleep started"))
            async let shutdown: Void = server.shutdown()
            // GOAWAY comes first, while the call is still running...
            while connection.goawayReceived == nil, try await connection.nextEvent() != nil {}
            #expect(connection.goawayReceived == HTTP2ErrorCode.noError)
            #expect(!probe.recorded.contains("sleep finished"))
            // ...and the call in flight still completes.
            let response = try await connection.response(streamID: stream)
            #expect(response.status == 0, "the call in flight completes")
            await shutdown
        }
        #expect(probe.recorded.contains("sleep finished"))
        await #expect(throws: (any Error).self) {
            try await TestConnection.with(port: port) { _ in }
        }
    }

    @Test("a connection without calls for the idle timeout gets GOAWAY and is closed")
    func idleTimeout() async throws {
        try await withServer(probe: Probe(), configure: { $0.connectionManagement.idleTimeout = .milliseconds(300) }) {
            _, port in
            // Measured from before connecting: the server's idle clock starts when it accepts the connection.
            let started = ContinuousClock.now
            try await TestConnection.with(port: port) { connection in
                while try await connection.nextEvent() != nil {}
                #expect(connection.goawayReceived == HTTP2ErrorCode.noError)
                #expect(ContinuousClock.now - started >= .milliseconds(300))
                #expect(ContinuousClock.now - started < .seconds(5))
            }
        }
    }

    @Test("a connection quiet for the memory release delay goes on serving calls whose frames fill nghttp2's buffer")
    func idleMemoryRelease() async throws {
        let configure: @Sendable (inout RPCServerConfiguration) -> Void = {
            $0.connectionManagement.idleMemoryReleaseDelay = .milliseconds(50)
        }
        try await withServer(probe: Probe(), configure: configure) { _, port in
            try await TestConnection.with(port: port) { connection in
                for round in 0..<3 {
                    // About 20 KB each way: more than one frame buffer's worth, written after each release.
                    let text = String(repeating: "habit \(round) ", count: 2_500)
                    let stream = try await connection.startCall(
                        path: "/test.Probe/Echo", extraHeaders: [("x-user", "ada")])
                    try await connection.send(
                        try encoded(Google_Protobuf_StringValue(text)), streamID: stream, end: true)
                    let response = try await connection.response(streamID: stream)
                    #expect(response.status == 0)
                    let reply = try Google_Protobuf_StringValue(
                        serializedBytes: Array(try #require(response.messages.first).readableBytesView))
                    #expect(reply.value == text + " from ada")
                    try await Task.sleep(for: .milliseconds(200))  // past the delay: the pages went back
                }
            }
        }
    }
}

/// A Sleep call of a minute with `grpc-timeout`, request sent and half-closed; returns its stream.
private func startMinuteLongSleep(on connection: TestConnection, grpcTimeout: String) async throws -> Int32 {
    let stream = try await connection.startCall(
        path: "/test.Probe/Sleep", extraHeaders: [("x-user", "ada"), ("grpc-timeout", grpcTimeout)])
    try await connection.send(try encoded(Google_Protobuf_Int64Value(60_000)), streamID: stream, end: true)
    return stream
}
