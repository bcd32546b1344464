import HabitFlowTestSupport
import HabitFlowTLS
import NIOCore
import Testing

@Suite("TLSHandler over loopback sockets", .timeLimit(.minutes(1)))
struct TLSHandlerTests {
    @Test("client and server handlers complete a TLS 1.3 handshake with ALPN h2", arguments: ["localhost", "127.0.0.1"])
    func handshakeNegotiatesH2(serverName: String) async throws {
        let server = try await TestServer.start(.testServer)
        let client = try TLSContext(configuration: .testClient(serverName: serverName))
        let hello = ByteBuffer(string: "hello")

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(hello, expectedReplyBytes: hello.readableBytes, halfClose: false, waitsForHandshake: true))
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(clientOutcome.handshake == TLSHandshakeCompleted(negotiatedProtocol: "h2", protocolVersion: "TLSv1.3"))
        #expect(serverOutcome.handshake == TLSHandshakeCompleted(negotiatedProtocol: "h2", protocolVersion: "TLSv1.3"))
        #expect(clientOutcome.received == hello)
        #expect(clientOutcome.errors.isEmpty, "\(clientOutcome.errors)")
        // The client closed with close_notify, so the server saw a clean shutdown.
        #expect(serverOutcome.errors.isEmpty, "\(serverOutcome.errors)")
    }

    @Test("a 5 MiB payload is echoed back intact")
    func echoesFiveMebibytes() async throws {
        let server = try await TestServer.start(.testServer)
        let client = try TLSContext(configuration: .testClient())
        let payload = patternedPayload(count: 5 * 1024 * 1024)

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(payload, expectedReplyBytes: payload.readableBytes, halfClose: false, waitsForHandshake: true))
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(clientOutcome.errors.isEmpty, "\(clientOutcome.errors)")
        #expect(serverOutcome.errors.isEmpty, "\(serverOutcome.errors)")
        #expect(clientOutcome.received.readableBytes == payload.readableBytes)
        #expect(clientOutcome.received == payload)
    }

    @Test("writes made before the handshake completes are sent after it, in order")
    func writesBeforeHandshakeAreHeld() async throws {
        let server = try await TestServer.start(.testServer)
        let client = try TLSContext(configuration: .testClient())
        let payload = patternedPayload(count: 100_000)

        // Sent from channelActive, long before the server's Finished arrives.
        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(payload, expectedReplyBytes: payload.readableBytes, halfClose: false, waitsForHandshake: false))
        _ = await server.nextOutcome()
        try await server.stop()

        #expect(clientOutcome.errors.isEmpty, "\(clientOutcome.errors)")
        #expect(clientOutcome.received == payload)
    }

    @Test("records cut into pieces of any size are reassembled", arguments: [1, 7, 1000])
    func partialRecords(pieceSize: Int) async throws {
        let server = try await TestServer.start(.testServer, splitReadsInto: pieceSize)
        let client = try TLSContext(configuration: .testClient())
        let payload = patternedPayload(count: pieceSize == 1 ? 40_000 : 300_000)

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(payload, expectedReplyBytes: payload.readableBytes, halfClose: false, waitsForHandshake: true))
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(serverOutcome.handshake?.negotiatedProtocol == "h2")
        #expect(clientOutcome.errors.isEmpty, "\(clientOutcome.errors)")
        #expect(clientOutcome.received == payload)
    }

    @Test("a peer that half-closes after close_notify still gets its reply")
    func halfClosedPeer() async throws {
        let server = try await TestServer.start(.testServer, allowsHalfClosure: true)
        let client = try TLSContext(configuration: .testClient())
        let payload = patternedPayload(count: 1_000_000)

        // The client sends, then close_notify and a TCP half-close; the server echoes after seeing inputClosed's
        // worth of data and closes when it is done.
        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(payload, expectedReplyBytes: nil, halfClose: true, waitsForHandshake: true),
            allowsHalfClosure: true)
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(serverOutcome.sawInputClosed)
        #expect(serverOutcome.errors.isEmpty, "\(serverOutcome.errors)")
        #expect(clientOutcome.errors.isEmpty, "\(clientOutcome.errors)")
        #expect(clientOutcome.received == payload)
    }
}

@Suite("TLS failures", .timeLimit(.minutes(1)))
struct TLSFailureTests {
    @Test("a server certificate from an unknown CA is refused by the client")
    func unknownCertificateAuthority() async throws {
        let certificates = TestCertificates.shared
        let server = try await TestServer.start(
            .server(
                certificateChain: .file(certificates.rogueServer.certificatePath),
                privateKey: .file(certificates.rogueServer.privateKeyPath)))
        let client = try TLSContext(configuration: .testClient())

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(ByteBuffer(string: "secret"), expectedReplyBytes: 6, halfClose: false, waitsForHandshake: true))
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(clientOutcome.handshake == nil)
        #expect(clientOutcome.received.readableBytes == 0)
        let error = try #require(clientOutcome.tlsErrors.first)
        #expect(error.code == .certificateVerificationFailed)
        #expect(error.description.contains("unable to get local issuer certificate"), "\(error)")
        // The client told the server why with an alert.
        #expect(serverOutcome.handshake == nil)
        #expect(serverOutcome.tlsErrors.first?.description.contains("unknown ca") == true, "\(serverOutcome.errors)")
    }

    @Test("a certificate for another host is refused", arguments: ["api.habitflow.invalid", "127.0.0.2"])
    func hostnameMismatch(serverName: String) async throws {
        let server = try await TestServer.start(.testServer)
        let client = try TLSContext(configuration: .testClient(serverName: serverName))

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(ByteBuffer(string: "x"), expectedReplyBytes: 1, halfClose: false, waitsForHandshake: true))
        _ = await server.nextOutcome()
        try await server.stop()

        #expect(clientOutcome.handshake == nil)
        let error = try #require(clientOutcome.tlsErrors.first)
        #expect(error.code == .certificateVerificationFailed)
        #expect(error.description.contains("mismatch"), "\(error)")
    }

    @Test("the per-connection server name overrides the configuration's")
    func serverNameOverride() async throws {
        let server = try await TestServer.start(.testServer)
        let client = try TLSContext(configuration: .testClient(serverName: "api.habitflow.invalid"))

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, "localhost"),
            behaviour: .send(ByteBuffer(string: "x"), expectedReplyBytes: 1, halfClose: false, waitsForHandshake: true))
        _ = await server.nextOutcome()
        try await server.stop()

        #expect(clientOutcome.handshake?.negotiatedProtocol == "h2")
        #expect(clientOutcome.errors.isEmpty, "\(clientOutcome.errors)")
    }

    @Test("a client offering ALPN without h2 is refused with no_application_protocol")
    func clientWithoutH2() async throws {
        let server = try await TestServer.start(.testServer)
        let client = try TLSContext(
            configuration: .client(
                serverName: "localhost", trustRoots: .certificates(.file(TestCertificates.shared.caCertificatePath))
            ) { $0.applicationProtocols = ["http/1.1"] })

        let clientOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(ByteBuffer(string: "x"), expectedReplyBytes: 1, halfClose: false, waitsForHandshake: true))
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(clientOutcome.handshake == nil)
        #expect(serverOutcome.handshake == nil)
        #expect(clientOutcome.tlsErrors.first?.code == .noApplicationProtocol, "\(clientOutcome.errors)")
        #expect(serverOutcome.tlsErrors.first?.code == .noApplicationProtocol, "\(serverOutcome.errors)")
    }

    @Test("a client sending no ALPN gets no protocol, or is refused when the server requires one")
    func clientWithoutALPN() async throws {
        let client = try TLSContext(
            configuration: .client(
                serverName: "localhost", trustRoots: .certificates(.file(TestCertificates.shared.caCertificatePath))
            ) { $0.applicationProtocols = [] })

        let lenient = try await TestServer.start(.testServer)
        let accepted = try await runClient(
            port: lenient.port, tls: (client, nil),
            behaviour: .send(ByteBuffer(string: "x"), expectedReplyBytes: 1, halfClose: false, waitsForHandshake: true))
        _ = await lenient.nextOutcome()
        try await lenient.stop()
        #expect(accepted.handshake == TLSHandshakeCompleted(negotiatedProtocol: nil, protocolVersion: "TLSv1.3"))

        let certificates = TestCertificates.shared
        let strict = try await TestServer.start(
            .server(
                certificateChain: .file(certificates.server.certificatePath),
                privateKey: .file(certificates.server.privateKeyPath)
            ) { $0.requiresApplicationProtocol = true })
        let refused = try await runClient(
            port: strict.port, tls: (client, nil),
            behaviour: .send(ByteBuffer(string: "x"), expectedReplyBytes: 1, halfClose: false, waitsForHandshake: true))
        let strictOutcome = try #require(await strict.nextOutcome())
        try await strict.stop()
        #expect(refused.handshake == nil)
        #expect(refused.tlsErrors.first?.code == .noApplicationProtocol, "\(refused.errors)")
        #expect(strictOutcome.tlsErrors.first?.code == .noApplicationProtocol, "\(strictOutcome.errors)")
    }

    @Test(
        "garbage instead of a ClientHello closes the connection, and the server keeps serving",
        arguments: [
            Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8),
            [0x16, 0x03, 0x01, 0x00, 0x08, 0x01, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00],
            (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 131) },
        ])
    func garbageClientHello(garbage: [UInt8]) async throws {
        let server = try await TestServer.start(.testServer)

        let rawOutcome = try await runClient(
            port: server.port, tls: nil,
            behaviour: .send(ByteBuffer(bytes: garbage), expectedReplyBytes: nil, halfClose: false, waitsForHandshake: false))
        let serverOutcome = try #require(await server.nextOutcome())

        // The raw client returned, so the server closed the connection; it may have sent an alert first.
        #expect(serverOutcome.handshake == nil)
        let error = try #require(serverOutcome.tlsErrors.first, "\(serverOutcome.errors)")
        #expect(error.code == .handshakeFailed)
        #expect(!error.reasons.isEmpty)
        if rawOutcome.received.readableBytes > 0 {
            #expect(rawOutcome.received.getInteger(at: rawOutcome.received.readerIndex, as: UInt8.self) == 0x15)  // alert
        }

        let client = try TLSContext(configuration: .testClient())
        let goodOutcome = try await runClient(
            port: server.port, tls: (client, nil),
            behaviour: .send(ByteBuffer(string: "ok"), expectedReplyBytes: 2, halfClose: false, waitsForHandshake: true))
        try await server.stop()
        #expect(goodOutcome.received == ByteBuffer(string: "ok"))
    }

    @Test("a server that requires client certificates accepts ours and refuses a client without one")
    func mutualTLS() async throws {
        let certificates = TestCertificates.shared
        let server = try await TestServer.start(
            .server(
                certificateChain: .file(certificates.server.certificatePath),
                privateKey: .file(certificates.server.privateKeyPath)
            ) { $0.clientCertificateTrustRoots = .certificates(.file(certificates.caCertificatePath)) })

        let withCertificate = try TLSContext(
            configuration: .client(
                serverName: "localhost", trustRoots: .certificates(.file(certificates.caCertificatePath))
            ) {
                $0.identity = .init(
                    certificateChain: .file(certificates.client.certificatePath),
                    privateKey: .file(certificates.client.privateKeyPath))
            })
        let accepted = try await runClient(
            port: server.port, tls: (withCertificate, nil),
            behaviour: .send(ByteBuffer(string: "ok"), expectedReplyBytes: 2, halfClose: false, waitsForHandshake: true))
        let acceptedOnServer = try #require(await server.nextOutcome())
        #expect(accepted.received == ByteBuffer(string: "ok"))
        #expect(acceptedOnServer.handshake != nil)

        let without = try TLSContext(configuration: .testClient())
        let refused = try await runClient(
            port: server.port, tls: (without, nil),
            behaviour: .send(ByteBuffer(string: "ok"), expectedReplyBytes: 2, halfClose: false, waitsForHandshake: true))
        let refusedOnServer = try #require(await server.nextOutcome())
        try await server.stop()
        #expect(refused.received.readableBytes == 0)
        #expect(refusedOnServer.handshake == nil)
        #expect(!refusedOnServer.tlsErrors.isEmpty, "\(refusedOnServer.errors)")
    }
}
