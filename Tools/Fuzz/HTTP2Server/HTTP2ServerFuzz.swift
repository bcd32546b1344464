internal import Foundation
internal import HabitFlowCompression
internal import HabitFlowFuzzSupport
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowRPCServer
internal import Logging
internal import NIOCore
internal import NIOEmbedded
internal import SwiftProtobuf

// A whole server connection — `RPCServer`'s connection handler over an nghttp2 session, on an `EmbeddedChannel` —
// fed arbitrary bytes after a valid client connection preface, with a service whose four methods (one of each kind)
// echo, stream, fail with a chosen status and send the client's metadata back. Then, as the input says, time passes
// (deadlines, the connection's age limit and the graceful shutdown it starts, idle and keepalive timers) and the
// client half-closes. Last the connection closes, and every handler must end.
//
// Input: 1 byte picks the size of the reads the bytes arrive in, 1 byte of epilogue flags (see `Epilogue`), then the
// bytes the client sends after the 24-byte preface: its SETTINGS, HEADERS, DATA... (the seeds are real requests).

private let clientPreface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
private let readSizes = [Int.max, 1, 9, 64, 1000]

private struct Epilogue: OptionSet {
    let rawValue: UInt8
    /// Three seconds pass: the age limit starts a graceful shutdown, whose final GOAWAY follows a second later.
    static let ageShutdown = Epilogue(rawValue: 1 << 0)
    /// An hour passes: deadlines, the grace period, idle and keepalive timers.
    static let anHourLater = Epilogue(rawValue: 1 << 1)
    /// The client closes its side of the TCP connection.
    static let inputClosed = Epilogue(rawValue: 1 << 2)
}

private let server: RPCServer = {
    var configuration = RPCServerConfiguration(port: 0)
    configuration.maxReceiveMessageSize = 16 << 10
    configuration.requestQueueHighWatermark = 2
    configuration.responseQueueHighWatermark = 4 << 10
    configuration.keepalive.pingInterval = .seconds(60)
    configuration.connectionManagement.maxConnectionAge = .seconds(2)
    configuration.connectionManagement.gracePeriod = .seconds(5)
    return RPCServer(
        configuration: configuration, services: [EchoService()], group: EmbeddedEventLoop(),
        logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))
}()

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.writeSeedsIfAsked(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let readSize = input.pick(readSizes)
    let epilogue = Epilogue(rawValue: input.byte())
    let bytes = clientPreface + input.rest()

    let loop = EmbeddedEventLoop()
    let channel = EmbeddedChannel(loop: loop)
    defer {
        _ = try? channel.finish(acceptAlreadyClosed: true)
        loop.run()
        try? loop.syncShutdownGracefully()
    }
    do {
        try server.serve(channel)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_051)).wait()
    } catch {
        fatalError("could not set up the connection: \(error)")
    }

    var offset = 0
    while offset < bytes.count, channel.isActive {
        let count = min(readSize, bytes.count - offset)
        _ = try? channel.writeInbound(ByteBuffer(bytes: bytes[offset..<(offset + count)]))
        offset += count
        settle(channel, loop)
    }
    if epilogue.contains(.ageShutdown), channel.isActive {
        loop.advanceTime(by: .seconds(3))
        settle(channel, loop)
    }
    if epilogue.contains(.anHourLater), channel.isActive {
        loop.advanceTime(to: .now() + .hours(1))
        settle(channel, loop)
    }
    if epilogue.contains(.inputClosed), channel.isActive {
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        settle(channel, loop)
    }
    _ = try? channel.close().wait()
    settle(channel, loop)
    expect(EchoService.running.value == 0, "\(EchoService.running.value) handlers still running after the close")
    return 0
}

/// Runs what the loop has to do and drops what the server wrote (the fuzzer plays a client that never reads).
private func settle(_ channel: EmbeddedChannel, _ loop: EmbeddedEventLoop) {
    loop.run()
    while (try? channel.readOutbound(as: ByteBuffer.self)) ?? nil != nil {}
}

// MARK: - The service

/// `fuzz.Echo`: one method of each kind. The unary one acts on the first byte of its request: `E` fails with the
/// status code of the second byte and the rest as message, `M` sends the request metadata back as response
/// metadata and trailers, `Z` asks for a compressed response; anything else is echoed.
private struct EchoService: RPCService {
    static let service = "fuzz.Echo"
    /// Handlers running now, on the fuzzing thread only (the embedded loop runs them).
    nonisolated(unsafe) static var running = Counter()

    struct Counter {
        var value = 0
    }

    var serviceName: String { Self.service }

    var methods: [ServerMethod] {
        [
            .unary(MethodDescriptor(service: Self.service, method: "Unary")) {
                (request: Google_Protobuf_BytesValue, context: ServerContext) in
                Self.running.value += 1
                defer { Self.running.value -= 1 }
                let value = Array(request.value)
                switch value.first {
                case UInt8(ascii: "E"):
                    let code = RPCStatusCode(rawValue: Int(value.dropFirst().first ?? 2) % 16 + 1) ?? .unknown
                    var error = RPCError(code, String(decoding: value.dropFirst(2), as: UTF8.self))
                    error.trailers.add("x-fuzz-reason", "failed on purpose")
                    throw error
                case UInt8(ascii: "M"):
                    for entry in context.requestMetadata {
                        switch entry.value {
                        case .text(let text):
                            context.addInitialMetadata(entry.key, text)
                            context.addTrailer(entry.key, text)
                        case .binary(let bytes):
                            var metadata = Metadata()
                            metadata.add(entry.key, binary: bytes)
                            context.addInitialMetadata(metadata)
                            context.addTrailers(metadata)
                        }
                    }
                case UInt8(ascii: "Z"):
                    context.compressResponses = true
                default:
                    break
                }
                return request
            },
            .serverStreaming(MethodDescriptor(service: Self.service, method: "ServerStream")) {
                (request: Google_Protobuf_BytesValue, writer: ResponseWriter<Google_Protobuf_BytesValue>, _) in
                Self.running.value += 1
                defer { Self.running.value -= 1 }
                for _ in 0..<((request.value.first ?? 3) % 8) { try await writer.write(request) }
            },
            .clientStreaming(MethodDescriptor(service: Self.service, method: "ClientStream")) {
                (requests: RequestStream<Google_Protobuf_BytesValue>, _: ServerContext) in
                Self.running.value += 1
                defer { Self.running.value -= 1 }
                var total = Google_Protobuf_BytesValue()
                for try await request in requests where total.value.count < 64 << 10 { total.value += request.value }
                return total
            },
            ServerMethod(
                descriptor: MethodDescriptor(service: Self.service, method: "Bidi"), kind: .bidirectionalStreaming
            ) { _, transport in
                Self.running.value += 1
                defer { Self.running.value -= 1 }
                try await transport.sendInitialMetadata()
                while let request = try await transport.nextRequest() {
                    try await transport.sendResponse(request.payload, compressed: request.wasCompressed)
                }
            },
        ]
    }
}

// MARK: - Seeds

/// What a client sends after the preface, made by our own HTTP/2 session in the client role.
private func seeds() -> [String: [UInt8]] {
    typealias Request = (headers: [HTTP2HeaderField], body: [UInt8], endStream: Bool)
    func request(
        _ method: String, messages: [[UInt8]] = [], compressed: Bool = false, endStream: Bool = true,
        extraHeaders: [(String, String)] = [], contentType: String = "application/grpc"
    ) -> Request {
        var headers = [
            HTTP2HeaderField(name: ":method", value: "POST"),
            HTTP2HeaderField(name: ":scheme", value: "http"),
            HTTP2HeaderField(name: ":path", value: "/\(EchoService.service)/\(method)"),
            HTTP2HeaderField(name: ":authority", value: "localhost"),
            HTTP2HeaderField(name: "content-type", value: contentType),
            HTTP2HeaderField(name: "te", value: "trailers"),
        ]
        headers += extraHeaders.map { HTTP2HeaderField(name: $0.0, value: $0.1) }
        var body: [UInt8] = []
        for message in messages {
            let payload = compressed ? Array(Gzip.compress(ByteBuffer(bytes: message)).readableBytesView) : message
            body += [compressed ? 1 : 0] + withUnsafeBytes(of: UInt32(payload.count).bigEndian, Array.init) + payload
        }
        return (headers, body, endStream)
    }
    func bytesValue(_ text: String) -> [UInt8] {
        (try? Google_Protobuf_BytesValue.with { $0.value = Data(text.utf8) }.serializedBytes()) ?? []
    }
    /// The client's bytes after the preface for these requests, one stream each, plus what `extra` adds.
    func connection(
        readSize: Int = Int.max, epilogue: Epilogue = [], _ requests: [Request],
        extra: (HTTP2Session, [Int32]) -> Void = { _, _ in }
    ) -> [UInt8] {
        guard let session = try? HTTP2Session(role: .client) else { fatalError("no client session") }
        var streamIDs: [Int32] = []
        for request in requests {
            guard let streamID = try? session.submitRequest(request.headers, endStream: false) else {
                fatalError("could not submit a request")
            }
            session.writeData(ByteBuffer(bytes: request.body), streamID: streamID)
            if request.endStream { session.finishStream(streamID, trailers: nil) }
            streamIDs.append(streamID)
        }
        extra(session, streamIDs)
        var output = ByteBuffer()
        _ = try? session.drainOutput(into: &output)
        var builder = FuzzInputBuilder()
        builder.pick(readSize, in: readSizes)
        builder.byte(epilogue.rawValue)
        builder.bytes(Array(output.readableBytesView).dropFirst(clientPreface.count))
        return builder.bytes
    }
    return [
        "unary": connection([request("Unary", messages: [bytesValue("hello")])]),
        "unary-byte-by-byte": connection(readSize: 1, [request("Unary", messages: [bytesValue("hello")])]),
        "unary-error": connection([request("Unary", messages: [bytesValue("E\u{5}no such habit: 50% done\n")])]),
        "unary-metadata": connection([
            request(
                "Unary", messages: [bytesValue("M")],
                extraHeaders: [("x-request-id", "42"), ("x-trace-bin", "AAECAw"), ("x-user", "émoji 🎉")])
        ]),
        "unary-gzip": connection([
            request(
                "Unary", messages: [bytesValue("Zzzzzzzzzzzzzzzzzzzzzzzzzzz")], compressed: true,
                extraHeaders: [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "identity, gzip")])
        ]),
        "unary-timeout": connection(
            epilogue: [.anHourLater],
            [request("Unary", messages: [], endStream: false, extraHeaders: [("grpc-timeout", "100m")])]),
        "unary-two-messages": connection([request("Unary", messages: [bytesValue("a"), bytesValue("b")])]),
        "unary-bad-content-type": connection(
            [request("Unary", messages: [bytesValue("x")], contentType: "text/plain")]),
        "unknown-method": connection([request("Nope", messages: [bytesValue("x")])]),
        "server-stream": connection([request("ServerStream", messages: [bytesValue("\u{7}stream")])]),
        "client-stream": connection(
            [request("ClientStream", messages: [bytesValue("a"), bytesValue("b"), bytesValue("c")])]),
        "bidi-open": connection(
            epilogue: [.inputClosed],
            [request("Bidi", messages: [bytesValue("ping"), bytesValue("pong")], endStream: false)]),
        "bidi-shutdown": connection(
            epilogue: [.ageShutdown, .anHourLater], [request("Bidi", messages: [bytesValue("x")], endStream: false)]),
        "many-streams": connection(
            (0..<5).map { _ in request("Unary", messages: [bytesValue("m")]) }
                + [request("ServerStream", messages: [bytesValue("\u{3}")])]),
        "reset-and-ping": connection([request("Bidi", messages: [bytesValue("x")], endStream: false)]) {
            session, streams in
            session.ping(0x0102_0304_0506_0708)
            for stream in streams { session.resetStream(stream, errorCode: .cancel) }
            session.submitGoaway(errorCode: .noError)
        },
    ]
}
