import HabitFlowHTTP2
import NIOCore
import Testing

@Suite("What a session holds for a peer that does not read")
struct OutboundQueueTests {
    /// A server session with `streams` request streams opened by a client whose windows are at `window`.
    static func serverWithStreams(_ streams: Int, clientWindow window: Int32) throws -> (HTTP2Session, [Int32]) {
        var clientConfiguration = HTTP2Configuration()
        clientConfiguration.initialStreamWindowSize = window
        clientConfiguration.connectionWindowSize = window
        let client = try HTTP2Session(role: .client, configuration: clientConfiguration)
        let server = try HTTP2Session(role: .server)
        var ids: [Int32] = []
        for _ in 0..<streams {
            ids.append(
                try client.submitRequest(
                    [
                        .init(name: ":method", value: "POST"), .init(name: ":scheme", value: "http"),
                        .init(name: ":path", value: "/p"), .init(name: ":authority", value: "localhost"),
                    ],
                    endStream: true))
        }
        var toServer = ByteBuffer()
        try client.drainOutput(into: &toServer)
        _ = try server.receive(toServer)
        var toClient = ByteBuffer()
        try server.drainOutput(into: &toClient)
        _ = try client.receive(toClient)  // the server's SETTINGS
        toServer.clear()
        try client.drainOutput(into: &toServer)  // the client's SETTINGS ACK and window
        _ = try server.receive(toServer)
        for id in ids {
            try server.submitResponse([.init(name: ":status", value: "200")], streamID: id, endStream: false)
        }
        return (server, ids)
    }

    @Test("the connection's queued bytes add up the streams', and drop as nghttp2 sends or streams reset")
    func totalQueuedBytes() throws {
        let (server, ids) = try Self.serverWithStreams(3, clientWindow: 1 << 20)
        for id in ids { server.writeData(ByteBuffer(repeating: 1, count: 100_000), streamID: id) }
        #expect(server.totalQueuedOutboundBytes == 300_000)
        server.resetStream(ids[0], errorCode: .cancel)
        #expect(server.totalQueuedOutboundBytes == 200_000)
        var output = ByteBuffer()
        try server.drainOutput(into: &output)
        #expect(server.totalQueuedOutboundBytes == 0)
        #expect(ids.dropFirst().allSatisfy { server.queuedOutboundBytes(streamID: $0) == 0 })
    }

    @Test("a drain with a limit stops at the frame that crosses it and leaves the rest queued")
    func drainLimit() throws {
        let (server, ids) = try Self.serverWithStreams(2, clientWindow: Int32.max)
        for id in ids { server.writeData(ByteBuffer(repeating: 1, count: 1 << 20), streamID: id) }
        var output = ByteBuffer()
        try server.drainOutput(into: &output, limit: 256 << 10)
        #expect(output.readableBytes >= 256 << 10)
        #expect(output.readableBytes < (256 << 10) + 16_384 + 9 + 1024)
        #expect(server.wantsWrite)
        #expect(server.totalQueuedOutboundBytes > (2 << 20) - output.readableBytes - 1024)
        try server.drainOutput(into: &output)
        #expect(server.totalQueuedOutboundBytes == 0)
    }
}
