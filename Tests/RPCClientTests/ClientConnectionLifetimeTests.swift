import HabitFlowRPC
@testable import HabitFlowRPCClient
import HabitFlowTestSupport
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// A closed client connection must free what it held, like a server's (see ServerConnectionLifetimeTests): the handler
/// used to keep its `ChannelHandlerContext`, which holds the handler, so every connection a channel ever opened stayed.
@Suite("What a closed client connection leaves behind")
struct ClientConnectionLifetimeTests {
    @Test("a closed connection frees its channel and everything its handler held")
    func closedConnectionIsFreed() throws {
        try expectFreedAfterClose { channel, loop in
            let target = RPCChannelConfiguration.Target(host: "127.0.0.1", port: 50_051)
            let ready = loop.makePromise(of: Void.self)
            try channel.pipeline.syncOperations.addHandler(
                ClientConnectionHandler(
                    configuration: RPCChannelConfiguration(targets: [target]), target: target,
                    logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), readyPromise: ready,
                    connectionState: ClientConnectionState(onUnusable: { _ in }),
                    keepaliveInterval: KeepaliveInterval(.seconds(300))))
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_051)).wait()
            try channel.writeInbound(ByteBuffer(bytes: [0, 0, 0, 0x4, 0, 0, 0, 0, 0]))  // the server's SETTINGS
            loop.run()
            try ready.futureResult.wait()
            let written = try channel.readOutbound(as: ByteBuffer.self)
            #expect(written != nil, "the client sent no preface")
        }
    }
}
