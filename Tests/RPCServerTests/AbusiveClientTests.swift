import HabitFlowHTTP2
import HabitFlowRPC
import HabitFlowRPCServer
import NIOCore
import NIOPosix
import SwiftProtobuf
import Testing

/// Clients that hold on to the server's resources on purpose (issue #28); Tests/Interop/abuse_test.py runs the same
/// attacks at scale against interop-server and reports the figures.
@Suite("RPC server against slow and abusive clients")
struct AbusiveClientTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 0x4, 0, 0, 0, 0, 0]

    static func headerTimeout(_ timeout: Duration) -> (inout RPCServerConfiguration) -> Void {
        { $0.connectionManagement.headerTimeout = timeout }
    }

    @Test("a client dribbling a header block gets GOAWAY ENHANCE_YOUR_CALM header_timeout and is disconnected")
    func slowHeaders() async throws {
        // Timeouts here leave the client's own setup time (a sanitizer build takes 200 ms and more) inside the limit.
        try await withServer(probe: Probe(), configure: Self.headerTimeout(.milliseconds(500))) { _, port in
            let started = ContinuousClock.now
            // A HEADERS frame announcing 100 bytes, of which 3 ever come.
            let received = try await RawConnection.exchange(
                port: port, send: Self.preface + [0, 0, 100, 0x1, 0x4, 0, 0, 0, 1, 0x82, 0x86, 0x84])
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(500))
            #expect(elapsed < .seconds(5))
            let goaway = try #require(RawConnection.lastGoaway(in: received))
            #expect(goaway.code == HTTP2ErrorCode.enhanceYourCalm)
            #expect(goaway.debugData == "header_timeout")
        }
    }

    @Test("a connection that never sends the preface is closed after the header timeout")
    func silentConnection() async throws {
        try await withServer(probe: Probe(), configure: Self.headerTimeout(.milliseconds(300))) { _, port in
            let started = ContinuousClock.now
            _ = try await RawConnection.exchange(port: port, send: [])
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(300))
            #expect(elapsed < .seconds(5))
        }
    }

    @Test("the header timeout leaves alone a client that sent its headers and then waits")
    func promptClientKept() async throws {
        try await withServer(probe: Probe(), configure: Self.headerTimeout(.milliseconds(500))) { _, port in
            try await TestConnection.with(port: port) { connection in
                for _ in 0..<2 {
                    let stream = try await connection.startCall(
                        path: "/test.Probe/Sleep", extraHeaders: [("x-user", "ada")])
                    try await Task.sleep(for: .milliseconds(700))  // the request body comes late: that is allowed
                    try await connection.send(try encoded(Google_Protobuf_Int64Value(1)), streamID: stream, end: true)
                    let response = try await connection.response(streamID: stream)
                    #expect(response.status == 0)
                }
                #expect(connection.goawayReceived == nil)
            }
        }
    }

    @Test("a client reading none of many streams holds their writers near the connection's limit; one it reads flows")
    func connectionSendQueueLimit() async throws {
        let probe = Probe()
        let limit: (inout RPCServerConfiguration) -> Void = { $0.connectionResponseQueueHighWatermark = 1 << 20 }
        try await withServer(probe: probe, configure: limit) { _, port in
            var clientConfiguration = HTTP2Configuration()
            clientConfiguration.manualFlowControl = true
            clientConfiguration.initialStreamWindowSize = 64 << 10
            clientConfiguration.connectionWindowSize = 16 << 20
            let user = [("x-user", "ada")]
            try await TestConnection.with(port: port, configuration: clientConfiguration) { connection in
                // 8 streams of 64 KiB messages, never read: each could queue 1 MiB (its own limit), 8 MiB in all.
                for _ in 0..<8 {
                    let stream = try await connection.startCall(path: "/test.Probe/Flood", extraHeaders: user)
                    try await connection.send(encoded(Google_Protobuf_Int64Value(1000)), streamID: stream, end: true)
                }
                try await Task.sleep(for: .milliseconds(500))
                // The connection's 1 MiB (16 messages), a message per stream beyond it, and one per stream window.
                let written = probe.count
                #expect(written <= 48, "the handlers wrote \(written) messages of 64 KiB to a client reading nothing")

                // A stream the client does read is not held up by the others.
                let reader = try await connection.startCall(path: "/test.Probe/Flood", extraHeaders: user)
                try await connection.send(try encoded(Google_Protobuf_Int64Value(200)), streamID: reader, end: true)
                let response = try await connection.response(streamID: reader, consume: true)
                #expect(response.status == 0)
                #expect(response.messages.count == 200)
            }
        }
    }
}

/// A plain TCP connection for bytes no HTTP/2 library would send.
enum RawConnection {
    /// Connects, sends `bytes`, and returns everything the server sent until it closed the connection (or until we
    /// gave up waiting after `timeout`).
    static func exchange(port: Int, send bytes: [UInt8], timeout: Duration = .seconds(5)) async throws -> [UInt8] {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let giveUp = Task { [channel = channel.channel] in
            try await Task.sleep(for: timeout)
            try? await channel.close()
        }
        defer { giveUp.cancel() }
        return try await channel.executeThenClose { inbound, outbound in
            if !bytes.isEmpty { try await outbound.write(ByteBuffer(bytes: bytes)) }
            var received: [UInt8] = []
            do {
                for try await chunk in inbound { received += chunk.readableBytesView }
            } catch {
                // A reset after the server's last bytes ends the exchange as well.
            }
            return received
        }
    }

    /// The last GOAWAY frame among `bytes` (frames from the server, from the start).
    static func lastGoaway(in bytes: [UInt8]) -> (code: HTTP2ErrorCode, debugData: String)? {
        var position = 0
        var found: (HTTP2ErrorCode, String)?
        while position + 9 <= bytes.count {
            let length = Int(bytes[position]) << 16 | Int(bytes[position + 1]) << 8 | Int(bytes[position + 2])
            guard position + 9 + length <= bytes.count else { break }
            if bytes[position + 3] == 0x7, length >= 8 {
                let payload = bytes[(position + 9)..<(position + 9 + length)]
                let code = payload.dropFirst(4).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                found = (HTTP2ErrorCode(rawValue: code), String(decoding: payload.dropFirst(8), as: UTF8.self))
            }
            position += 9 + length
        }
        return found
    }
}
