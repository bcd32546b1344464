import Foundation
import HabitFlowCrypto
import HabitFlowLocking
import HabitFlowTLS
import HabitFlowTestSupport
import HabitFlowTokens
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// An HTTPS server on a loopback port (NIO, our TLS handler, the test CA's certificate) serving a key set that a test
/// can replace, plus paths that misbehave.
final class KeySetServer: Sendable {
    private struct State {
        var keySet: [UInt8] = Array(#"{"keys":[]}"#.utf8)
        var requests: [String] = []
    }

    private let state = Locked(State())
    private let channel: any Channel

    var port: Int { channel.localAddress?.port ?? 0 }

    func url(_ path: String) -> URL {
        URL(string: "https://127.0.0.1:\(port)\(path)") ?? URL(fileURLWithPath: "/")
    }

    /// How many requests asked for `path`.
    func requestCount(_ path: String) -> Int {
        state.withLock { $0.requests.filter { $0 == path }.count }
    }

    func serve(_ keySet: JSONWebKeySet) {
        state.withLock { $0.keySet = Array(keySet.json()) }
    }

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func start(certificate: TestCertificates.Identity = TestCertificates.shared.server) async throws
        -> KeySetServer
    {
        let context = try TLSContext(
            configuration: .server(
                certificateChain: .file(certificate.certificatePath), privateKey: .file(certificate.privateKeyPath)
            ) { $0.applicationProtocols = ["http/1.1"] })
        let box = Locked<KeySetServer?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(TLSHandler(context: context))
                    try pipeline.configureHTTPServerPipeline()
                    try pipeline.addHandler(
                        RouteHandler { path in box.withLock { $0 }?.respond(to: path) ?? .notFound })
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let server = KeySetServer(channel: channel)
        box.withLock { $0 = server }
        return server
    }

    func stop() async throws {
        try await channel.close()
    }

    enum Response {
        case body([UInt8], chunked: Bool)
        case status(HTTPResponseStatus)
        case never
        static let notFound = Response.status(.notFound)
    }

    fileprivate func respond(to path: String) -> Response {
        let keySet = state.withLock {
            $0.requests.append(path)
            return $0.keySet
        }
        switch path {
        case "/jwks", "/jwks?v=1": return .body(keySet, chunked: false)
        case "/jwks-chunked": return .body(keySet, chunked: true)
        case "/huge": return .body([UInt8](repeating: UInt8(ascii: " "), count: (1 << 20) + 1), chunked: false)
        case "/huge-chunked": return .body([UInt8](repeating: UInt8(ascii: " "), count: (1 << 20) + 1), chunked: true)
        case "/not-json": return .body(Array("<html>hello</html>".utf8), chunked: false)
        case "/redirect": return .status(.found)
        case "/broken": return .status(.internalServerError)
        case "/slow": return .never
        default: return .notFound
        }
    }
}

private final class RouteHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let route: @Sendable (String) -> KeySetServer.Response
    private var path = ""

    init(route: @escaping @Sendable (String) -> KeySetServer.Response) {
        self.route = route
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): path = head.uri
        case .body: break
        case .end: respond(context: context)
        }
    }

    private func respond(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        switch route(path) {
        case .never:
            return
        case .status(let status):
            headers.add(name: "Content-Length", value: "0")
            if status == .found { headers.add(name: "Location", value: "/jwks") }
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
                promise: nil)
        case .body(let body, let chunked):
            headers.add(name: "Content-Type", value: "application/json")
            if chunked {
                headers.add(name: "Transfer-Encoding", value: "chunked")
            } else {
                headers.add(name: "Content-Length", value: "\(body.count)")
            }
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil
            )
            var offset = 0
            repeat {
                let end = min(offset + 64 * 1024, body.count)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body[offset..<end])))), promise: nil)
                offset = end
            } while offset < body.count
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Runs `body` against a fresh server and stops the server afterwards, also when `body` throws.
private func withKeySetServer(
    certificate: TestCertificates.Identity = TestCertificates.shared.server,
    _ body: (KeySetServer) async throws -> Void
) async throws {
    let server = try await KeySetServer.start(certificate: certificate)
    do {
        try await body(server)
    } catch {
        try await server.stop()
        throw error
    }
    try await server.stop()
}

private let testTrustRoots = TLSConfiguration.TrustRoots.certificates(.file(TestCertificates.shared.caCertificatePath))

private func unavailableReason(_ body: () async throws(TokenError) -> JSONWebKeySet) async -> String? {
    if case .keySetUnavailable(let reason) = await tokenError(body) { return reason }
    return nil
}

@Suite("JWK Sets over HTTPS and from files")
struct KeySetFetchTests {
    @Test("loads a key set over HTTPS, with a content length or chunked, and with a query")
    func loadsOverHTTPS() async throws {
        try await withKeySetServer { server in
            let key = try ProviderKey.p256(kid: "k1")
            server.serve(JSONWebKeySet(keys: [key.jsonWebKey]))
            for path in ["/jwks", "/jwks-chunked", "/jwks?v=1"] {
                let set = try await JWKSSource.url(server.url(path), trustRoots: testTrustRoots).load()
                #expect(set.keys == [key.jsonWebKey], "\(path)")
            }
        }
    }

    @Test("refuses non-200 answers, bodies over 1 MiB, non-JSON, slow servers, untrusted certificates and http URLs")
    func failures() async throws {
        try await withKeySetServer { server in
            for path in ["/missing", "/redirect", "/broken", "/huge", "/huge-chunked"] {
                let reason = await unavailableReason { () async throws(TokenError) in
                    try await JWKSSource.url(server.url(path), trustRoots: testTrustRoots).load()
                }
                #expect(reason != nil, "\(path)")
            }
            #expect(
                await unavailableReason { () async throws(TokenError) in
                    try await JWKSSource.url(server.url("/missing"), trustRoots: testTrustRoots).load()
                }?.contains("404") == true)
            if case .malformed = await tokenError({ () async throws(TokenError) in
                try await JWKSSource.url(server.url("/not-json"), trustRoots: testTrustRoots).load()
            }) {
            } else {
                Issue.record("a non-JSON body was not refused as malformed")
            }

            let started = ContinuousClock.now
            let slow = await unavailableReason { () async throws(TokenError) in
                try await JWKSSource.url(server.url("/slow"), trustRoots: testTrustRoots, timeout: .milliseconds(300))
                    .load()
            }
            #expect(slow?.contains("within") == true)
            #expect(ContinuousClock.now - started < .seconds(5))

            // The system store does not know the test CA.
            #expect(
                await unavailableReason { () async throws(TokenError) in
                    try await JWKSSource.url(server.url("/jwks")).load()
                } != nil)
            let http = URL(string: "http://127.0.0.1:\(server.port)/jwks") ?? server.url("/")
            #expect(
                await unavailableReason { () async throws(TokenError) in
                    try await JWKSSource.url(http, trustRoots: testTrustRoots).load()
                } != nil)
            let closedPort = URL(string: "https://127.0.0.1:1/jwks") ?? server.url("/")
            #expect(
                await unavailableReason { () async throws(TokenError) in
                    try await JWKSSource.url(closedPort, trustRoots: testTrustRoots).load()
                } != nil)
        }
    }

    @Test("a server whose certificate another CA issued is refused")
    func rogueServer() async throws {
        try await withKeySetServer(certificate: TestCertificates.shared.rogueServer) { server in
            #expect(
                await unavailableReason { () async throws(TokenError) in
                    try await JWKSSource.url(server.url("/jwks"), trustRoots: testTrustRoots).load()
                } != nil)
            #expect(server.requestCount("/jwks") == 0)
        }
    }

    @Test("loads a key set from a file; a missing file is unavailable")
    func file() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(RealWorldKeySets.google.utf8).write(to: URL(fileURLWithPath: path))
        #expect(try await JWKSSource.file(path).load().keys.count == 2)
        #expect(
            await unavailableReason { () async throws(TokenError) in try await JWKSSource.file(path + ".missing").load()
            } != nil)
    }

    @Test("a token with an unknown kid makes the provider refetch, and then it verifies")
    func refetchOnUnknownKey() async throws {
        try await withKeySetServer { server in
            let oldKey = try ProviderKey.rsa(kid: "old")
            let newKey = try ProviderKey.p256(kid: "new")
            server.serve(JSONWebKeySet(keys: [oldKey.jsonWebKey]))
            let keys = JWKSProvider(
                source: .url(server.url("/jwks"), trustRoots: testTrustRoots), refetchInterval: .zero)
            let verifier = RefreshingIDTokenVerifier(providers: [.google(clientIDs: [googleClientID], keys: keys)])

            let first = try await verifier.verify(
                try oldKey.token(claims: googleClaims()), provider: "google", now: referenceNow)
            #expect(first.subject == "110169484474386276334")
            #expect(server.requestCount("/jwks") == 1)
            // Known kid: served from the cache.
            _ = try await verifier.verify(
                try oldKey.token(claims: googleClaims()), provider: "google", now: referenceNow)
            #expect(server.requestCount("/jwks") == 1)

            // The provider rotates: the new key is published, then used.
            server.serve(JSONWebKeySet(keys: [oldKey.jsonWebKey, newKey.jsonWebKey]))
            let second = try await verifier.verify(
                try newKey.token(claims: googleClaims()), provider: "google", now: referenceNow)
            #expect(second.email == "ada@example.com")
            #expect(server.requestCount("/jwks") == 2)
            #expect(await keys.loadCount == 2)

            // A kid nobody publishes: one more fetch, then unknown.
            let strayToken = try ProviderKey.p256(kid: "stray").token(claims: googleClaims())
            let error = await tokenError { () async throws(TokenError) in
                try await verifier.verify(strayToken, provider: "google", now: referenceNow)
            }
            #expect(error == .unknownKey("stray"))
            #expect(server.requestCount("/jwks") == 3)
            #expect(
                await tokenError { () async throws(TokenError) in
                    try await verifier.verify(strayToken, provider: "apple", now: referenceNow)
                } == .unknownProvider("apple"))
        }
    }

    @Test("refetches are rate-limited, and concurrent callers share one fetch")
    func rateLimit() async throws {
        try await withKeySetServer { server in
            let oldKey = try ProviderKey.p256(kid: "old")
            let newKey = try ProviderKey.p256(kid: "new")
            server.serve(JSONWebKeySet(keys: [oldKey.jsonWebKey]))
            let keys = JWKSProvider(source: .url(server.url("/jwks"), trustRoots: testTrustRoots))
            #expect(keys.refetchInterval == .seconds(60))

            async let a = keys.keys()
            async let b = keys.keys()
            async let c = keys.keys(containing: "old")
            let results = try await [a, b, c]
            #expect(results.allSatisfy { $0.keys == [oldKey.jsonWebKey] })
            #expect(server.requestCount("/jwks") == 1)

            server.serve(JSONWebKeySet(keys: [oldKey.jsonWebKey, newKey.jsonWebKey]))
            let verifier = RefreshingIDTokenVerifier(providers: [.google(clientIDs: [googleClientID], keys: keys)])
            let newToken = try newKey.token(claims: googleClaims())
            for _ in 0..<5 {
                let error = await tokenError { () async throws(TokenError) in
                    try await verifier.verify(newToken, provider: "google", now: referenceNow)
                }
                #expect(error == .unknownKey("new"))
            }
            #expect(server.requestCount("/jwks") == 1)
            #expect(await keys.loadCount == 1)
        }
    }

    @Test(
        "a failed first load is reported and not retried inside the interval; held keys outlive a failed refetch"
    )
    func failedLoads() async throws {
        try await withKeySetServer { server in
            let failing = JWKSProvider(source: .url(server.url("/broken"), trustRoots: testTrustRoots))
            for _ in 0..<3 {
                if case .keySetUnavailable = await tokenError({ () async throws(TokenError) in try await failing.keys()
                    })
                {
                } else {
                    Issue.record("a failing source did not report keySetUnavailable")
                }
            }
            #expect(server.requestCount("/broken") == 1)

            let key = try ProviderKey.p256(kid: "k")
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
                .path
            try JSONWebKeySet(keys: [key.jsonWebKey]).json().write(to: URL(fileURLWithPath: path))
            let fromFile = JWKSProvider(source: .file(path), refetchInterval: .zero)
            #expect(try await fromFile.keys().keys.count == 1)
            try FileManager.default.removeItem(atPath: path)
            // The refetch for an unknown kid fails; the keys already held stay.
            #expect(try await fromFile.keys(containing: "other").keys == [key.jsonWebKey])
            #expect(await fromFile.loadCount == 2)
        }
    }

    @Test("keys older than maximumAge are loaded again; younger ones come from the cache")
    func maximumAge() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = JSONWebKeySet(keys: [try ProviderKey.p256(kid: "first").jsonWebKey])
        let second = JSONWebKeySet(keys: [try ProviderKey.p256(kid: "second").jsonWebKey])
        func publish(_ set: JSONWebKeySet) throws { try set.json().write(to: URL(fileURLWithPath: path)) }

        try publish(first)
        let aging = JWKSProvider(source: .file(path), refetchInterval: .zero, maximumAge: .zero)
        #expect(try await aging.keys() == first)
        try publish(second)
        #expect(try await aging.keys() == second)
        #expect(await aging.loadCount == 2)

        let cached = JWKSProvider(source: .file(path), refetchInterval: .zero)
        #expect(try await cached.keys() == second)
        try publish(first)
        #expect(try await cached.keys() == second)
        #expect(try await cached.keys(containing: "second") == second)
        #expect(await cached.loadCount == 1)
        // An unknown kid is what makes it look again.
        #expect(try await cached.keys(containing: "first") == first)
        #expect(await cached.loadCount == 2)
    }
}
