import HabitFlowTestSupport
import Foundation
import HabitFlowTLS
import NIOCore
import Testing

@Suite("Clients we did not write", .timeLimit(.minutes(1)))
struct TLSInteropTests {
    @Test("Python's ssl module completes a TLS 1.3 handshake and sees ALPN h2")
    func pythonClient() async throws {
        let server = try await TestServer.start(.testServer)
        let script = """
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            context.set_alpn_protocols(["h2", "http/1.1"])
            with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    tls.sendall(b"ping from python")
                    echoed = b""
                    while len(echoed) < 16:
                        echoed += tls.recv(64)
                    print(tls.version(), tls.selected_alpn_protocol(), echoed.decode())
            """
        let result = try await run(
            "/usr/bin/python3", ["-c", script, String(server.port), TestCertificates.shared.caCertificatePath])
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "TLSv1.3 h2 ping from python")
        #expect(serverOutcome.handshake == TLSHandshakeCompleted(negotiatedProtocol: "h2", protocolVersion: "TLSv1.3"))
    }

    @Test("openssl s_client -alpn h2 verifies our certificate and sees h2 selected")
    func opensslClient() async throws {
        let server = try await TestServer.start(.testServer)
        let result = try await run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-alpn", "h2",
                "-CAfile", TestCertificates.shared.caCertificatePath, "-verify_return_error",
            ],
            input: "ping from s_client\n")
        let serverOutcome = try #require(await server.nextOutcome())
        try await server.stop()

        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("New, TLSv1.3, Cipher is"), "\(result.output)")
        #expect(result.output.contains("ALPN protocol: h2"), "\(result.output)")
        #expect(result.output.contains("Verify return code: 0 (ok)"), "\(result.output)")
        #expect(serverOutcome.handshake?.negotiatedProtocol == "h2")
    }

    @Test("a client limited to TLS 1.2 is refused by the default server and accepted when the server allows 1.2")
    func tls12Client() async throws {
        let certificates = TestCertificates.shared
        let arguments = [
            "s_client", "-connect", "", "-servername", "localhost", "-alpn", "h2", "-tls1_2",
            "-CAfile", certificates.caCertificatePath, "-verify_return_error", "-brief",
        ]

        let strict = try await TestServer.start(.testServer)
        var strictArguments = arguments
        strictArguments[2] = "127.0.0.1:\(strict.port)"
        let refused = try await run("/usr/bin/openssl", strictArguments, input: "")
        _ = await strict.nextOutcome()
        try await strict.stop()
        #expect(refused.status != 0, "\(refused.output)")

        let lenient = try await TestServer.start(
            .server(
                certificateChain: .file(certificates.server.certificatePath),
                privateKey: .file(certificates.server.privateKeyPath)
            ) { $0.minimumVersion = .tls12 })
        var lenientArguments = arguments
        lenientArguments[2] = "127.0.0.1:\(lenient.port)"
        let accepted = try await run("/usr/bin/openssl", lenientArguments, input: "")
        let lenientOutcome = try #require(await lenient.nextOutcome())
        try await lenient.stop()
        #expect(accepted.output.contains("Protocol version: TLSv1.2"), "\(accepted.output)")
        #expect(lenientOutcome.handshake == TLSHandshakeCompleted(negotiatedProtocol: "h2", protocolVersion: "TLSv1.2"))
    }
}

@Suite("TLSContext configuration")
struct TLSContextTests {
    @Test("PEM bytes work like PEM files")
    func pemBytes() throws {
        let certificates = TestCertificates.shared
        let chain = try String(contentsOfFile: certificates.server.certificatePath, encoding: .utf8)
        let key = try Data(contentsOf: URL(fileURLWithPath: certificates.server.privateKeyPath))
        _ = try TLSContext(configuration: .server(certificateChain: .string(chain), privateKey: .bytes(key)))
        _ = try TLSContext(configuration: .client(serverName: "localhost", trustRoots: .certificates(.string(chain))))
        _ = try TLSContext(configuration: .client(serverName: "localhost"))  // the system store
    }

    @Test("a missing file fails when the context is created")
    func missingFile() {
        #expect {
            _ = try TLSContext(
                configuration: .server(certificateChain: .file("/nonexistent/cert.pem"), privateKey: .file("/x")))
        } throws: { error in
            (error as? TLSError)?.code == .invalidConfiguration && "\(error)".contains("/nonexistent/cert.pem")
        }
    }

    @Test("a key that does not match the certificate is refused")
    func mismatchedKey() {
        let certificates = TestCertificates.shared
        #expect {
            _ = try TLSContext(
                configuration: .server(
                    certificateChain: .file(certificates.server.certificatePath),
                    privateKey: .file(certificates.rogueServer.privateKeyPath)))
        } throws: { error in
            (error as? TLSError)?.code == .invalidConfiguration && "\(error)".contains("key values mismatch")
        }
    }

    @Test("trust roots without a certificate are refused")
    func emptyTrustRoots() {
        #expect(throws: TLSError.self) {
            _ = try TLSContext(configuration: .client(serverName: "localhost", trustRoots: .certificates(.string("nope"))))
        }
    }

    @Test("a verifying client needs a server name")
    func clientWithoutServerName() throws {
        let context = try TLSContext(configuration: .testClient(serverName: nil))
        #expect(throws: TLSError.self) { _ = try TLSHandler(context: context) }
        _ = try TLSHandler(context: context, serverName: "localhost")
    }
}
