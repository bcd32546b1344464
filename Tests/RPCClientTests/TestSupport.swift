import Foundation
import GRPCInteropTesting
import HabitFlowGRPCProtos
import HabitFlowLocking
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import HabitFlowTLS
import Logging
import NIOCore
import SwiftProtobuf
import Testing

let quietLogger = Logger(label: "rpc-client-tests", factory: { _ in SwiftLogNoOpLogHandler() })

/// What the probe handlers saw, for assertions about the server side.
final class ServerProbe: Sendable {
    private let entries = Locked<[String]>([])
    private let counters = Locked<[String: Int]>([:])
    private let durations = Locked<[Duration]>([])

    func record(_ entry: String) { entries.withLock { $0.append(entry) } }
    var recorded: [String] { entries.withLock { $0 } }
    func increment(_ name: String) { counters.withLock { $0[name, default: 0] += 1 } }
    func count(_ name: String) -> Int { counters.withLock { $0[name] ?? 0 } }
    func recordTimeRemaining(_ duration: Duration?) { if let duration { durations.withLock { $0.append(duration) } } }
    var timesRemaining: [Duration] { durations.withLock { $0 } }

    func waitFor(_ entry: String, timeout: Duration = .seconds(5)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if recorded.contains(entry) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}

/// Small methods for what the interop service does not cover, written against the core API (no generated code).
struct ProbeService: RPCService {
    let probe: ServerProbe
    var name = "server"
    var serviceName: String { "test.ClientProbe" }

    static func method(_ name: String) -> MethodDescriptor { MethodDescriptor(service: "test.ClientProbe", method: name) }
    static let sleep = method("Sleep")
    static let whoAmI = method("WhoAmI")
    static let unavailable = method("Unavailable")
    static let fail = method("Fail")
    static let echo = method("Echo")
    static let metadata = method("Metadata")
    /// Server streaming: the response headers (with `x-probe: early`) at once, one message `Int64Value` ms later.
    static let headersFirst = method("HeadersFirst")
    static let peer = method("Peer")

    var methods: [ServerMethod] {
        let probe = self.probe
        let name = self.name
        return [
            .unary(Self.sleep) { (request: Google_Protobuf_Int64Value, context) in
                probe.recordTimeRemaining(context.timeRemaining)
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
            .unary(Self.whoAmI) { (_: Google_Protobuf_Empty, _) in
                Google_Protobuf_StringValue(name)
            },
            .unary(Self.unavailable) { (_: Google_Protobuf_Empty, _) -> Google_Protobuf_Empty in
                probe.increment("unavailable")
                throw RPCError(.unavailable, "try again later")
            },
            .unary(Self.fail) { (_: Google_Protobuf_Empty, _) -> Google_Protobuf_Empty in
                var badRequest = Google_Rpc_BadRequest()
                badRequest.fieldViolations = [.with { $0.field = "name"; $0.description_p = "must not be empty" }]
                throw RPCError(.invalidArgument, "name: must not be empty ☹\tnew\nline").addingDetail(badRequest)
            },
            .unary(Self.echo) { (request: Google_Protobuf_BytesValue, _) in request },
            ServerMethod(descriptor: Self.headersFirst, kind: .serverStreaming) { context, transport in
                guard let request = try await transport.nextRequest() else { return }
                let delay = try Google_Protobuf_Int64Value(serializedBytes: Array(buffer: request.payload))
                context.addInitialMetadata("x-probe", "early")
                try await transport.sendInitialMetadata()
                try await Task.sleep(for: .milliseconds(delay.value))
                let response = try Google_Protobuf_Empty().serializedBytes() as [UInt8]
                try await transport.sendResponse(ByteBuffer(bytes: response), compressed: false)
            },
            .unary(Self.peer) { (_: Google_Protobuf_Empty, context) in Google_Protobuf_StringValue(context.peer) },
            .unary(Self.metadata) { (_: Google_Protobuf_Empty, context) in
                var seen = ["authorization", "traceparent", "x-user"].map { "\($0)=\(context.requestMetadata[$0] ?? "")" }
                // The keys whose fields arrived with HPACK's "never indexed" representation.
                let neverIndexed = context.requestMetadata.filter(\.neverIndexed).map(\.key).sorted()
                seen.append("never-indexed=" + neverIndexed.joined(separator: ","))
                context.addInitialMetadata("x-probe-secret", "answer", neverIndexed: true)
                context.addInitialMetadata("x-probe", "plain")
                return Google_Protobuf_StringValue(seen.joined(separator: ";"))
            },
        ]
    }
}

/// A server on loopback with the interop service and a probe service.
func startServer(
    port: Int = 0, name: String = "server", probe: ServerProbe = ServerProbe(), tls: TLSConfiguration? = nil,
    configure: (inout RPCServerConfiguration) -> Void = { _ in }
) async throws -> RPCServer {
    var configuration = RPCServerConfiguration(host: "127.0.0.1", port: port, tls: tls)
    configuration.maxReceiveMessageSize = 16 << 20
    configure(&configuration)
    let server = RPCServer(
        configuration: configuration, services: [InteropTestService(), ProbeService(probe: probe, name: name)],
        logger: quietLogger)
    try await server.start()
    return server
}

func makeChannel(
    ports: [Int], interceptors: [any ClientInterceptor] = [], configure: (inout RPCChannelConfiguration) -> Void = { _ in }
) throws -> RPCChannel {
    var configuration = RPCChannelConfiguration(targets: ports.map { .init(host: "127.0.0.1", port: $0) })
    configuration.maxReceiveMessageSize = 16 << 20
    configure(&configuration)
    return try RPCChannel(configuration: configuration, interceptors: interceptors, logger: quietLogger)
}

extension RPCServer {
    var port: Int { localAddress!.port! }
}

/// The resident set size of this process, from /proc/self/status.
func residentMemoryBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
    return kilobytes * 1024
}

/// The memory this process holds for its data: the resident set size, or under AddressSanitizer (`scripts/sanitize
/// address` builds with `-D HABITFLOW_ASAN`) the bytes its allocator has handed out and not taken back. The resident
/// set there would count the sanitizer's quarantine of freed blocks (up to 256 MiB by default), not what the code keeps.
func heldMemoryBytes() -> Int {
    #if HABITFLOW_ASAN
    addressSanitizerAllocatedBytes()
    #else
    residentMemoryBytes()
    #endif
}

/// What `heldMemoryBytes` measures in this build, for printed figures.
let heldMemoryKind: String = {
    #if HABITFLOW_ASAN
    "allocated bytes (AddressSanitizer)"
    #else
    "RSS"
    #endif
}()

#if HABITFLOW_ASAN
// compiler-rt's allocator interface (sanitizer/allocator_interface.h); the runtime is linked into sanitized builds.
@_silgen_name("__sanitizer_get_current_allocated_bytes")
private func addressSanitizerAllocatedBytes() -> Int
#endif

/// An `AsyncSequence` of requests fed by the test, for bidirectional ping-pong.
func requestStream<Element: Sendable>(
    of type: Element.Type = Element.self
) -> (AsyncStream<Element>, AsyncStream<Element>.Continuation) {
    AsyncStream.makeStream(of: Element.self)
}

/// A plain array as an `AsyncSequence`.
struct AsyncArray<Element: Sendable>: AsyncSequence, Sendable {
    let elements: [Element]
    init(_ elements: [Element]) { self.elements = elements }

    struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: ArraySlice<Element>
        mutating func next() async -> Element? { remaining.popFirst() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: elements[...]) }
}

/// Unary, server-streaming, client-streaming and bidirectional ping-pong calls with large and small messages, each
/// checked: what every transport (a server, a proxy) must carry.
func exerciseAllFourKinds(_ client: Grpc_Testing_TestService.Client) async throws {
    let response = try await client.unaryCall(
        .with {
            $0.responseSize = 314_159
            $0.payload = .with { $0.body = Data(count: 271_828) }
        })
    #expect(response.payload.body.count == 314_159)
    _ = try await client.emptyCall(Grpc_Testing_Empty())

    let sizes: [Int32] = [31415, 9, 2653, 58979]
    var received: [Int] = []
    for try await message in try await client.streamingOutputCall(
        .with { $0.responseParameters = sizes.map { size in .with { $0.size = size } } })
    {
        received.append(message.payload.body.count)
    }
    #expect(received == sizes.map(Int.init))

    let uploads = [27182, 8, 1828, 45904].map { size in
        Grpc_Testing_StreamingInputCallRequest.with { $0.payload = .with { $0.body = Data(count: size) } }
    }
    #expect(try await client.streamingInputCall(requests: AsyncArray(uploads)).aggregatedPayloadSize == 74922)

    // Ping-pong: each request goes out only after the previous response came back.
    let (requests, continuation) = requestStream(of: Grpc_Testing_StreamingOutputCallRequest.self)
    var iterator = try await client.fullDuplexCall(requests: requests).makeAsyncIterator()
    for size in sizes {
        continuation.yield(.with { $0.responseParameters = [.with { $0.size = size }] })
        #expect(try await iterator.next()?.payload.body.count == Int(size))
    }
    continuation.finish()
    #expect(try await iterator.next() == nil)
}
