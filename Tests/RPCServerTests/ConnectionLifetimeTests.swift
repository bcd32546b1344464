import HabitFlowRPC
import HabitFlowRPCServer
import HabitFlowTestSupport
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// A closed connection must free what it held. The HTTP/2 fuzz target's first long run ran out of memory after
/// 333,000 connections: each kept its handler, channel, event loop and output buffer (about 6 KB), because the handler
/// held its `ChannelHandlerContext`, which holds the handler.
@Suite("What a closed server connection leaves behind")
struct ServerConnectionLifetimeTests {
    @Test("a closed connection frees its channel and everything its handler held", arguments: [false, true])
    func closedConnectionIsFreed(afterACall: Bool) throws {
        let server = RPCServer(
            configuration: RPCServerConfiguration(port: 0), services: [], group: EmbeddedEventLoop(),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        try expectFreedAfterClose { channel, loop in
            try server.serve(channel)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_051)).wait()
            var bytes = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            bytes.writeBytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])  // an empty SETTINGS frame
            if afterACall { bytes.writeImmutableBuffer(unknownMethodRequest()) }
            try channel.writeInbound(bytes)
            loop.run()
            let written = try channel.readOutbound(as: ByteBuffer.self)
            #expect(written != nil, "the server answered nothing")
        }
    }

    /// HEADERS (stream 1, END_STREAM | END_HEADERS) of a call to a method nobody serves, without HPACK indexing.
    private func unknownMethodRequest() -> ByteBuffer {
        var block = ByteBuffer()
        for (name, value) in [
            (":method", "POST"), (":scheme", "http"), (":path", "/no.Such/Method"), (":authority", "localhost"),
            ("content-type", "application/grpc"), ("te", "trailers"),
        ] {
            block.writeInteger(UInt8(0))  // literal header field without indexing, new name
            block.writeInteger(UInt8(name.utf8.count))
            block.writeString(name)
            block.writeInteger(UInt8(value.utf8.count))
            block.writeString(value)
        }
        var frame = ByteBuffer()
        frame.writeInteger(UInt32(block.readableBytes) << 8 | 0x1)  // length (24 bits), type HEADERS
        frame.writeInteger(UInt8(0x5))  // END_STREAM | END_HEADERS
        frame.writeInteger(UInt32(1))
        frame.writeImmutableBuffer(block)
        return frame
    }
}
