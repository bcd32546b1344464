import HabitFlowHTTP2
import NIOCore
import Testing

@Suite("nghttp2 sessions in memory")
struct HTTP2SessionTests {
    /// Moves every pending byte between two sessions until both are quiet, collecting what each side saw.
    func exchange(client: HTTP2Session, server: HTTP2Session) throws -> (client: [HTTP2Event], server: [HTTP2Event]) {
        var clientEvents: [HTTP2Event] = []
        var serverEvents: [HTTP2Event] = []
        for _ in 0..<16 {
            var toServer = ByteBuffer()
            clientEvents += try client.drainOutput(into: &toServer)
            var toClient = ByteBuffer()
            serverEvents += try server.drainOutput(into: &toClient)
            if toServer.readableBytes > 0 { serverEvents += try server.receive(toServer) }
            if toClient.readableBytes > 0 { clientEvents += try client.receive(toClient) }
            if toServer.readableBytes == 0 && toClient.readableBytes == 0 && !client.wantsWrite && !server.wantsWrite {
                break
            }
        }
        return (clientEvents, serverEvents)
    }

    @Test("reports the nghttp2 version it linked")
    func version() {
        let version = HTTP2Session.libraryVersion
        #expect(version.hasPrefix("1."), "unexpected nghttp2 version \(version)")
    }

    @Test("client and server complete the connection preface and acknowledge each other's SETTINGS")
    func preface() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        let (clientEvents, serverEvents) = try exchange(client: client, server: server)

        #expect(serverEvents.contains { if case .settings(acknowledgement: false) = $0 { true } else { false } })
        #expect(serverEvents.contains { if case .settings(acknowledgement: true) = $0 { true } else { false } })
        #expect(clientEvents.contains { if case .settings(acknowledgement: false) = $0 { true } else { false } })
        #expect(clientEvents.contains { if case .settings(acknowledgement: true) = $0 { true } else { false } })
        #expect(client.wantsReadOrWrite && server.wantsReadOrWrite)
    }

    @Test("long header values and names repeated across requests arrive exactly as sent, also when they change")
    func repeatedLongHeadersArriveAsSent() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        _ = try exchange(client: client, server: server)
        let tokenA = "Bearer " + String(repeating: "a", count: 300)
        let tokenB = "Bearer " + String(repeating: "a", count: 299) + "b"  // same length, last byte differs
        // A value that changes every time (a request id), a long custom name, and a token that comes back.
        let sent: [(token: String, requestID: String)] = [
            (tokenA, "11111111-1111-4111-8111-111111111111"), (tokenA, "22222222-2222-4222-8222-222222222222"),
            (tokenB, "33333333-3333-4333-8333-333333333333"), (tokenA, "44444444-4444-4444-8444-444444444444"),
            ("short", "55555555-5555-4555-8555-555555555555"),
        ]
        for request in sent {
            let streamID = try client.submitRequest(
                Self.post("/echo") + [
                    .init(name: "authorization", value: request.token),
                    .init(name: "x-request-id", value: request.requestID),
                    .init(name: "x-a-rather-long-custom-header", value: "application/grpc+proto"),
                ],
                endStream: true)
            // One exchange per request, so every block is decoded after the one before it.
            let (_, serverEvents) = try exchange(client: client, server: server)
            let fields = serverEvents.compactMap { event -> [HTTP2HeaderField]? in
                if case .headers(streamID, let fields, true) = event { fields } else { nil }
            }.first
            #expect(fields?.first { $0.name == "authorization" }?.value == request.token)
            #expect(fields?.first { $0.name == "x-request-id" }?.value == request.requestID)
            #expect(fields?.first { $0.name == "x-a-rather-long-custom-header" }?.value == "application/grpc+proto")
        }
    }

    @Test("a field sent never indexed arrives marked so and is sent in full every time; an indexable one is not")
    func neverIndexedFieldsStayOutOfTheTables() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        _ = try exchange(client: client, server: server)
        let secret = String(repeating: "x", count: 100)
        let shared = String(repeating: "y", count: 100)
        var blockSizes: [Int] = []
        for _ in 0..<2 {
            let streamID = try client.submitRequest(
                Self.post("/echo") + [
                    .init(name: "x-secret", value: secret, neverIndexed: true),
                    .init(name: "x-shared", value: shared),
                ],
                endStream: true)
            var toServer = ByteBuffer()
            try client.drainOutput(into: &toServer)
            blockSizes.append(toServer.readableBytes)
            let fields = try server.receive(toServer).compactMap { event -> [HTTP2HeaderField]? in
                if case .headers(streamID, let fields, true) = event { fields } else { nil }
            }.first
            #expect(fields?.first { $0.name == "x-secret" } == .init(name: "x-secret", value: secret, neverIndexed: true))
            #expect(fields?.first { $0.name == "x-shared" } == .init(name: "x-shared", value: shared))
            _ = try exchange(client: client, server: server)
        }
        // The second block refers to the indexed field by its table index, but carries the secret again (about
        // 90 bytes Huffman-coded): without the flag it would be a few bytes.
        #expect(blockSizes[1] > 90)
        #expect(blockSizes[1] < blockSizes[0] - 80)
    }

    @Test("a request with a body gets headers, data and trailers back")
    func requestResponseWithTrailers() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        let streamID = try client.submitRequest(
            Self.post("/echo") + [
                .init(name: "te", value: "trailers"),
            ],
            endStream: false)
        client.writeData(ByteBuffer(string: "ping"), streamID: streamID)
        client.finishStream(streamID, trailers: nil)
        var (clientEvents, serverEvents) = try exchange(client: client, server: server)

        let request = serverEvents.compactMap { event -> [HTTP2HeaderField]? in
            if case .headers(streamID, let fields, false) = event { fields } else { nil }
        }.first
        #expect(request?.contains(.init(name: ":path", value: "/echo")) == true)
        let body = serverEvents.compactMap { event -> String? in
            if case .data(streamID, let buffer) = event { String(buffer: buffer) } else { nil }
        }.joined()
        #expect(body == "ping")
        #expect(serverEvents.contains { if case .endOfStream(streamID) = $0 { true } else { false } })

        try server.submitResponse([.init(name: ":status", value: "200")], streamID: streamID, endStream: false)
        server.writeData(ByteBuffer(string: "pong"), streamID: streamID)
        server.finishStream(streamID, trailers: [.init(name: "grpc-status", value: "0")])
        (clientEvents, serverEvents) = try exchange(client: client, server: server)

        let headerBlocks = clientEvents.compactMap { event -> ([HTTP2HeaderField], Bool)? in
            if case .headers(streamID, let fields, let end) = event { (fields, end) } else { nil }
        }
        #expect(headerBlocks.count == 2)
        #expect(headerBlocks.first?.0 == [.init(name: ":status", value: "200")])
        #expect(headerBlocks.last?.0 == [.init(name: "grpc-status", value: "0")])
        #expect(headerBlocks.last?.1 == true)
        let reply = clientEvents.compactMap { event -> String? in
            if case .data(streamID, let buffer) = event { String(buffer: buffer) } else { nil }
        }.joined()
        #expect(reply == "pong")
        #expect(clientEvents.contains { if case .streamClosed(streamID, .noError) = $0 { true } else { false } })
    }

    /// A POST request's pseudo-header fields for `path`.
    static func post(_ path: String) -> [HTTP2HeaderField] {
        [
            .init(name: ":method", value: "POST"), .init(name: ":scheme", value: "http"),
            .init(name: ":path", value: path), .init(name: ":authority", value: "localhost"),
        ]
    }

    /// A POST on `path` with `body`, answered with `reply` and grpc-status 0; returns what each side received.
    func roundTrip(
        client: HTTP2Session, server: HTTP2Session, path: String, body: ByteBuffer, reply: ByteBuffer
    ) throws -> (request: ByteBuffer, response: ByteBuffer, trailers: [HTTP2HeaderField]) {
        let streamID = try client.submitRequest(Self.post(path), endStream: false)
        client.writeData(body, streamID: streamID)
        client.finishStream(streamID, trailers: nil)
        let serverEvents = try exchange(client: client, server: server).server
        var request = ByteBuffer()
        for case .data(streamID, var buffer) in serverEvents { request.writeBuffer(&buffer) }

        try server.submitResponse([.init(name: ":status", value: "200")], streamID: streamID, endStream: false)
        server.writeData(reply, streamID: streamID)
        server.finishStream(
            streamID, trailers: [.init(name: "grpc-status", value: "0"), .init(name: "x-path", value: path)])
        let clientEvents = try exchange(client: client, server: server).client
        var response = ByteBuffer()
        var trailers: [HTTP2HeaderField] = []
        for event in clientEvents {
            switch event {
            case .data(streamID, var buffer): response.writeBuffer(&buffer)
            case .headers(streamID, let fields, true): trailers = fields
            default: break
            }
        }
        return (request, response, trailers)
    }

    static func patterned(_ count: Int, seed: UInt8) -> ByteBuffer {
        ByteBuffer(bytes: (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) &+ seed })
    }

    @Test("an idle session gives its frame buffer's pages back, and what it sends afterwards arrives intact")
    func idleMemoryReleaseKeepsTheSessionWorking() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        _ = try exchange(client: client, server: server)
        #expect(server.releaseIdleMemory() >= 16 * 1024)
        #expect(client.releaseIdleMemory() >= 16 * 1024)

        // Frames filling the buffer, then again after another release: bodies, and headers coded against the HPACK
        // tables both sides kept, arrive as sent.
        for (round, path) in ["/first", "/second", "/first"].enumerated() {
            let body = Self.patterned(20_000, seed: UInt8(round))
            let reply = Self.patterned(15_000, seed: UInt8(round + 100))
            let received = try roundTrip(client: client, server: server, path: path, body: body, reply: reply)
            #expect(received.request == body)
            #expect(received.response == reply)
            #expect(received.trailers == [.init(name: "grpc-status", value: "0"), .init(name: "x-path", value: path)])
            #expect(server.releaseIdleMemory() > 0)
            #expect(client.releaseIdleMemory() > 0)
        }
    }

    @Test("a session keeps its stream table while streams are open, and gives its page back once they closed")
    func streamTableRelease() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        _ = try exchange(client: client, server: server)
        // No stream yet: the frame buffer only.
        let serverQuiet = server.releaseIdleMemory()
        let clientQuiet = client.releaseIdleMemory()

        // Three calls open at once, releasing between their requests and their responses: the table stays.
        let streamIDs = try ["/a", "/b", "/c"].map { try client.submitRequest(Self.post($0), endStream: true) }
        _ = try exchange(client: client, server: server)
        #expect(server.releaseIdleMemory() == serverQuiet)
        #expect(client.releaseIdleMemory() == clientQuiet)
        for (index, streamID) in streamIDs.enumerated() {
            try server.submitResponse([.init(name: ":status", value: "200")], streamID: streamID, endStream: false)
            server.writeData(Self.patterned(3_000, seed: UInt8(index)), streamID: streamID)
            server.finishStream(streamID, trailers: [.init(name: "grpc-status", value: "\(index)")])
        }
        var replies: [Int32: ByteBuffer] = [:]
        var trailers: [Int32: [HTTP2HeaderField]] = [:]
        for event in try exchange(client: client, server: server).client {
            switch event {
            case .data(let streamID, var buffer): replies[streamID, default: ByteBuffer()].writeBuffer(&buffer)
            case .headers(let streamID, let fields, true): trailers[streamID] = fields
            default: break
            }
        }
        for (index, streamID) in streamIDs.enumerated() {
            #expect(replies[streamID] == Self.patterned(3_000, seed: UInt8(index)))
            #expect(trailers[streamID] == [.init(name: "grpc-status", value: "\(index)")])
        }

        // All closed: the table is empty again and goes back with the frame buffer (a page or more), once.
        #expect(server.releaseIdleMemory() >= serverQuiet + 4 * 1024)
        #expect(client.releaseIdleMemory() >= clientQuiet + 4 * 1024)
        #expect(server.releaseIdleMemory() == serverQuiet)
        #expect(client.releaseIdleMemory() == clientQuiet)
    }

    @Test("a session keeps its frame buffer while a frame is partly out, and the frame arrives whole")
    func noReleaseInTheMiddleOfAFrame() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        _ = try exchange(client: client, server: server)
        let streamID = try client.submitRequest(Self.post("/big"), endStream: true)
        _ = try exchange(client: client, server: server)
        let reply = Self.patterned(40_000, seed: 7)
        try server.submitResponse([.init(name: ":status", value: "200")], streamID: streamID, endStream: false)
        server.writeData(reply, streamID: streamID)
        server.finishStream(streamID, trailers: [.init(name: "grpc-status", value: "0")])

        var toClient = ByteBuffer()
        try server.drainOutput(into: &toClient, limit: 100)
        #expect(server.wantsWrite)
        #expect(server.releaseIdleMemory() == 0)
        try server.drainOutput(into: &toClient)
        var received = ByteBuffer()
        for case .data(streamID, var buffer) in try client.receive(toClient) { received.writeBuffer(&buffer) }
        #expect(received == reply)
        #expect(server.releaseIdleMemory() > 0)
    }

    @Test("a server refuses bytes that are not the client preface")
    func badPreface() throws {
        let server = try HTTP2Session(role: .server)
        var ignored = ByteBuffer()
        try server.drainOutput(into: &ignored)
        #expect {
            try server.receive(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        } throws: { error in
            (error as? HTTP2Error)?.isBadClientMagic == true
        }
    }
}
