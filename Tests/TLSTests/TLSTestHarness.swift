import HabitFlowTestSupport
import HabitFlowTLS
import NIOCore
import NIOPosix

/// What one end saw of one connection, reported when the channel went inactive.
struct ConnectionOutcome: Sendable {
    var handshake: TLSHandshakeCompleted?
    var errors: [any Error] = []
    var received = ByteBuffer()
    var sawInputClosed = false

    var tlsErrors: [TLSError] { errors.compactMap { $0 as? TLSError } }
}

/// The application end of a test connection, above the TLS handler (or straight on the socket for raw clients).
final class ProbeHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Behaviour {
        /// Writes every byte back; after the peer half-closes, closes once the echoes are written.
        case echo
        /// Sends `payload` (after the handshake, or at once without TLS), then closes after `expectedReplyBytes`
        /// came back; with `halfClose`, closes its output right after sending instead.
        case send(ByteBuffer, expectedReplyBytes: Int?, halfClose: Bool, waitsForHandshake: Bool)
    }

    private let behaviour: Behaviour
    private let report: @Sendable (ConnectionOutcome) -> Void
    private var outcome = ConnectionOutcome()
    private var lastEcho: EventLoopFuture<Void>?

    init(_ behaviour: Behaviour, report: @escaping @Sendable (ConnectionOutcome) -> Void) {
        self.behaviour = behaviour
        self.report = report
    }

    func channelActive(context: ChannelHandlerContext) {
        if case .send(_, _, _, waitsForHandshake: false) = behaviour { send(context: context) }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let handshake = event as? TLSHandshakeCompleted {
            outcome.handshake = handshake
            if case .send(_, _, _, waitsForHandshake: true) = behaviour { send(context: context) }
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            outcome.sawInputClosed = true
            if case .echo = behaviour {
                let channel = context.channel
                (lastEcho ?? context.eventLoop.makeSucceededVoidFuture()).whenComplete { _ in
                    channel.close(promise: nil)
                }
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        switch behaviour {
        case .echo:
            lastEcho = context.write(wrapOutboundOut(bytes))
        case .send(_, let expected, _, _):
            outcome.received.writeBuffer(&bytes)
            if let expected, outcome.received.readableBytes >= expected { context.close(promise: nil) }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if case .echo = behaviour { context.flush() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        outcome.errors.append(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        report(outcome)
    }

    private func send(context: ChannelHandlerContext) {
        guard case .send(let payload, _, let halfClose, _) = behaviour else { return }
        context.writeAndFlush(wrapOutboundOut(payload), promise: nil)
        if halfClose { context.close(mode: .output, promise: nil) }
    }
}

/// Splits every read into pieces of `size` bytes, so the layer above sees records cut at arbitrary places.
final class ReadSplitter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let size: Int

    init(size: Int) { self.size = size }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        while let piece = bytes.readSlice(length: min(size, bytes.readableBytes)), piece.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(piece))
        }
    }
}

/// A TLS server on an ephemeral loopback port whose connections report their outcomes to `outcomes`.
final class TestServer {
    let channel: any Channel
    private var outcomes: AsyncStream<ConnectionOutcome>.Iterator
    var port: Int { channel.localAddress!.port! }

    private init(channel: any Channel, outcomes: AsyncStream<ConnectionOutcome>) {
        self.channel = channel
        self.outcomes = outcomes.makeAsyncIterator()
    }

    static func start(
        _ configuration: TLSConfiguration,
        allowsHalfClosure: Bool = false,
        splitReadsInto splitSize: Int? = nil
    ) async throws -> TestServer {
        let context = try TLSContext(configuration: configuration)
        let (outcomes, continuation) = AsyncStream<ConnectionOutcome>.makeStream()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: allowsHalfClosure)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let splitSize { try pipeline.addHandler(ReadSplitter(size: splitSize)) }
                    try pipeline.addHandler(TLSHandler(context: context))
                    try pipeline.addHandler(ProbeHandler(.echo) { continuation.yield($0) })
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return TestServer(channel: channel, outcomes: outcomes)
    }

    /// The outcome of the next connection to finish.
    func nextOutcome() async -> ConnectionOutcome? {
        var iterator = outcomes
        defer { outcomes = iterator }
        return await iterator.next()
    }

    func stop() async throws {
        try await channel.close()
    }
}

/// Connects to `port`, through a ``TLSHandler`` when `tls` is given, runs `behaviour` and returns what it saw.
func runClient(
    port: Int,
    tls: (context: TLSContext, serverName: String?)?,
    behaviour: ProbeHandler.Behaviour,
    allowsHalfClosure: Bool = false
) async throws -> ConnectionOutcome {
    let (outcomes, continuation) = AsyncStream<ConnectionOutcome>.makeStream()
    _ = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .channelOption(.allowRemoteHalfClosure, value: allowsHalfClosure)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let pipeline = channel.pipeline.syncOperations
                if let tls { try pipeline.addHandler(TLSHandler(context: tls.context, serverName: tls.serverName)) }
                try pipeline.addHandler(ProbeHandler(behaviour) { continuation.yield($0) })
            }
        }
        .connect(host: "127.0.0.1", port: port)
        .get()
    var iterator = outcomes.makeAsyncIterator()
    return await iterator.next()!
}

/// A payload whose bytes depend on their position, so reordering or loss shows.
func patternedPayload(count: Int) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { bytes in
        // Raw memory, because per-byte ByteBuffer calls take seconds for MiBs in a debug build.
        for index in 0..<count { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8) }
        return count
    }
    return buffer
}

extension TLSConfiguration {
    static var testServer: TLSConfiguration {
        let certificates = TestCertificates.shared
        return .server(
            certificateChain: .file(certificates.server.certificatePath),
            privateKey: .file(certificates.server.privateKeyPath))
    }

    static func testClient(serverName: String? = "localhost") -> TLSConfiguration {
        .client(serverName: serverName, trustRoots: .certificates(.file(TestCertificates.shared.caCertificatePath)))
    }
}
