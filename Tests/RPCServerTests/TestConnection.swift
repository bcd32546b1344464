import HabitFlowHTTP2
import HabitFlowRPC
import NIOCore
import NIOPosix

/// What came back on one stream.
struct TestResponse {
    var headers: [HTTP2HeaderField] = []
    var messages: [ByteBuffer] = []
    var trailers: [HTTP2HeaderField] = []
    var resetCode: HTTP2ErrorCode?

    /// grpc-status from the trailers, or from the headers of a Trailers-Only response.
    var status: Int? {
        (trailers + headers).first { $0.name == "grpc-status" }.flatMap { Int($0.value) }
    }

    func field(_ name: String) -> String? {
        (headers + trailers).first { $0.name == name }?.value
    }
}

/// A bare gRPC client over a real loopback socket, built on our nghttp2 session: it lets tests make calls by hand,
/// hold back flow control, and reset streams, and watch what the server does.
final class TestConnection {
    let session: HTTP2Session
    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var events: [HTTP2Event] = []
    private(set) var goawayReceived: HTTP2ErrorCode?

    init(
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        configuration: HTTP2Configuration
    ) throws {
        self.session = try HTTP2Session(role: .client, configuration: configuration)
        self.inbound = inbound.makeAsyncIterator()
        self.outbound = outbound
    }

    /// Connects to `port` on 127.0.0.1 and runs `body` with the connection, closing it afterwards.
    static func with<Result: Sendable>(
        port: Int, configuration: HTTP2Configuration = .init(),
        _ body: (TestConnection) async throws -> Result
    ) async throws -> Result {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            let connection = try TestConnection(inbound: inbound, outbound: outbound, configuration: configuration)
            try await connection.flush()
            return try await body(connection)
        }
    }

    func flush() async throws {
        var buffer = ByteBuffer()
        try session.drainOutput(into: &buffer)
        if buffer.readableBytes > 0 { try await outbound.write(buffer) }
    }

    /// Opens a gRPC call. `extraHeaders` go after the standard ones (metadata, grpc-timeout, ...).
    func startCall(
        path: String, contentType: String = "application/grpc", method: String = "POST",
        extraHeaders: [(String, String)] = []
    ) async throws -> Int32 {
        var fields: [HTTP2HeaderField] = [
            .init(name: ":method", value: method), .init(name: ":scheme", value: "http"),
            .init(name: ":path", value: path), .init(name: ":authority", value: "127.0.0.1"),
            .init(name: "content-type", value: contentType), .init(name: "te", value: "trailers"),
        ]
        fields += extraHeaders.map { HTTP2HeaderField(name: $0.0, value: $0.1) }
        let streamID = try session.submitRequest(fields, endStream: false)
        try await flush()
        return streamID
    }

    /// Sends one message (length-prefixed), optionally ending the request stream.
    func send(_ payload: [UInt8], streamID: Int32, end: Bool) async throws {
        var framed = ByteBuffer()
        writeFramedMessage(ByteBuffer(bytes: payload), compressed: false, into: &framed)
        session.writeData(framed, streamID: streamID)
        if end { session.finishStream(streamID, trailers: nil) }
        try await flush()
    }

    /// Sends bytes as they are (a web request body), optionally ending the request stream.
    func sendRaw(_ bytes: [UInt8], streamID: Int32, end: Bool) async throws {
        session.writeData(ByteBuffer(bytes: bytes), streamID: streamID)
        if end { session.finishStream(streamID, trailers: nil) }
        try await flush()
    }

    /// Reads until the stream closes, keeping the body as it came (a web response: not gRPC framing).
    func rawResponse(streamID: Int32) async throws -> (headers: [HTTP2HeaderField], body: [UInt8]) {
        var headers: [HTTP2HeaderField] = []
        var body: [UInt8] = []
        while let event = try await nextEvent() {
            switch event {
            case .headers(streamID, let fields, _): headers += fields
            case .data(streamID, let bytes):
                session.consume(bytes.readableBytes, streamID: streamID)
                body += bytes.readableBytesView
            case .streamClosed(streamID, _): return (headers, body)
            default: continue
            }
        }
        return (headers, body)
    }

    func reset(_ streamID: Int32) async throws {
        session.resetStream(streamID, errorCode: .cancel)
        try await flush()
    }

    /// The next event from the server (reading from the socket as needed); nil when the connection closed.
    func nextEvent() async throws -> HTTP2Event? {
        while events.isEmpty {
            // What handling the last events queued (WINDOW_UPDATEs for consumed data) goes out before we wait.
            try await flush()
            guard let bytes = try await inbound.next() else { return nil }
            events += try session.receive(bytes)
            try await flush()
        }
        let event = events.removeFirst()
        if case .goaway(_, let code) = event { goawayReceived = code }
        return event
    }

    /// Reads until the stream closes. With `consume: false` (manual flow control) received bytes are not
    /// acknowledged, so the server's flow-control window stays shut.
    func response(streamID: Int32, consume: Bool = true) async throws -> TestResponse {
        var response = TestResponse()
        var deframer = MessageDeframer(maxMessageSize: 64 << 20)
        while let event = try await nextEvent() {
            switch event {
            case .headers(streamID, let fields, _):
                if response.headers.isEmpty { response.headers = fields } else { response.trailers = fields }
            case .data(streamID, let bytes):
                if consume { session.consume(bytes.readableBytes, streamID: streamID) }
                deframer.append(bytes)
                while let message = try deframer.next() { response.messages.append(message.payload) }
            case .streamReset(streamID, let code):
                response.resetCode = code
            case .streamClosed(streamID, _):
                return response
            default:
                continue
            }
        }
        return response
    }
}
