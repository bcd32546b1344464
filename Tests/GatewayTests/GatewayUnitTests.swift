import HabitFlowInternalCredential
import Foundation
import HabitFlowCrypto
@testable import HabitFlowGateway
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import Logging
import Prometheus
import HabitFlowTokens
import HabitFlowLocking
import Testing

/// The gateway's parts on their own: caches, limits, metadata shaping, configuration.
@Suite struct GatewayUnitTests {
    @Test func forwardedCallsCarryTheGatewaysIdentityOnly() async throws {
        let caller = AuthenticatedCaller(userID: UUID(), sessionID: "session-1")
        let info = GatewayCallInfo(requestID: "request-7", clientAddress: "203.0.113.9", caller: caller)
        let credential = InternalCredential(secret: "gateway-unit-test")
        let method = MethodDescriptor(service: "habitflow.habits.v1.HabitsService", method: "GetHabit")
        var options = CallOptions()
        options.metadata.add("authorization", "Bearer secret")
        options.metadata.add("x-request-id", "the-clients-own")
        options.metadata.add("x-habitflow-user-id", UUID().uuidString)
        options.metadata.add("x-habitflow-internal-auth", "forged")
        options.metadata.add("x-app-version", "1.2")
        GatewayCallInfo.$current.withValue(info) {
            GatewayServiceDefinition.prepareForwardedCall(&options, method: method, credential: credential, defaultTimeout: .seconds(30))
        }
        #expect(options.metadata["authorization"] == nil)
        #expect(options.metadata.values("x-habitflow-internal-auth").count == 1)
        #expect(options.metadata.values("x-habitflow-user-id") == [.text(caller.userID.uuidString.lowercased())])
        #expect(options.metadata["x-habitflow-session-id"] == "session-1")
        #expect(options.metadata["x-habitflow-client-address"] == "203.0.113.9")
        #expect(options.metadata.values("x-request-id") == [.text("request-7")])
        #expect(options.metadata["x-app-version"] == "1.2")
        #expect(options.timeout == .seconds(30))
        // The signature (a secret on a connection shared with other clients' metadata) and the request id (unique
        // to the call) stay out of HPACK's tables; the rest may be indexed.
        let neverIndexed = options.metadata.filter(\.neverIndexed).map(\.key)
        #expect(neverIndexed.sorted() == ["x-habitflow-internal-auth", "x-request-id"])
        // The gateway signs for the caller it authenticated: a service verifies exactly that identity.
        let identity = try credential.verify(options.metadata, method: method)
        #expect(identity == CallerIdentity(caller: "gateway", userID: caller.userID, sessionID: "session-1", clientAddress: "203.0.113.9"))

        // A sign-in call (no user yet) is signed for the gateway and the client's address only; a call with its own
        // deadline keeps it.
        var signIn = CallOptions(deadline: .now + .seconds(2))
        signIn.metadata.add("x-habitflow-user-id", UUID().uuidString.lowercased())
        GatewayCallInfo.$current.withValue(GatewayCallInfo(requestID: "request-8", clientAddress: "203.0.113.9")) {
            GatewayServiceDefinition.prepareForwardedCall(&signIn, method: method, credential: credential, defaultTimeout: .seconds(30))
        }
        #expect(signIn.timeout == nil)
        #expect(try credential.verify(signIn.metadata, method: method) == CallerIdentity(caller: "gateway", clientAddress: "203.0.113.9"))
    }

    @Test func requestIDsAndClientAddresses() {
        #expect(GatewayCallInfo.requestID(from: ["x-request-id": "abc-123"]) == "abc-123")
        #expect(UUID(uuidString: GatewayCallInfo.requestID(from: [:])) != nil)
        #expect(UUID(uuidString: GatewayCallInfo.requestID(from: ["x-request-id": "has space"])) != nil)
        #expect(UUID(uuidString: GatewayCallInfo.requestID(from: ["x-request-id": .text(String(repeating: "a", count: 200))])) != nil)
        #expect(GatewayCallInfo.clientAddress(fromPeer: "ipv4:198.51.100.4:51234") == "198.51.100.4")
        #expect(GatewayCallInfo.clientAddress(fromPeer: "ipv6:[2001:db8::1]:443") == "2001:db8::1")
        #expect(GatewayCallInfo.clientAddress(fromPeer: "unix:/tmp/socket") == "unix:/tmp/socket")
    }

    @Test func newRequestIDsAreDistinctVersion4UUIDs() {
        let generator = RequestIDGenerator()
        let ids = (0..<10_000).map { _ in generator.next() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            let text = id.lowercasedString
            #expect(UUID(uuidString: text) == id)
            #expect(Array(text)[14] == "4")
            #expect("89ab".contains(Array(text)[19]))
        }
        // Two gateways (two generators) do not repeat each other's ids.
        #expect(Set(ids).isDisjoint(with: (0..<10_000).map { _ in RequestIDGenerator().next() }))
    }

    @Test func accessLogDurationsInMilliseconds() {
        #expect(GatewayInterceptor.milliseconds(.zero) == "0.0")
        #expect(GatewayInterceptor.milliseconds(.milliseconds(12)) == "12.0")
        #expect(GatewayInterceptor.milliseconds(.microseconds(50)) == "0.05")
        #expect(GatewayInterceptor.milliseconds(.microseconds(1234)) == "1.234")
        #expect(GatewayInterceptor.milliseconds(.microseconds(1200)) == "1.2")
        #expect(GatewayInterceptor.milliseconds(.microseconds(1007)) == "1.007")
        #expect(GatewayInterceptor.milliseconds(.nanoseconds(1_499)) == "0.001")
        #expect(GatewayInterceptor.milliseconds(.nanoseconds(400)) == "0.0")
        #expect(GatewayInterceptor.milliseconds(.seconds(3725)) == "3725000.0")
        // The same text a Double of those milliseconds prints.
        for microseconds in [1, 10, 99, 100, 101, 999, 1000, 1001, 12_340, 987_654] {
            let duration = Duration.microseconds(microseconds)
            #expect(GatewayInterceptor.milliseconds(duration) == String(Double(microseconds) / 1000))
        }
    }

    @Test func accessLogFieldsComeInKeyOrder() {
        for userID: String? in ["0f0e0d0c-0b0a-4908-8706-050403020100", nil] {
            let fields = AccessLogFields(
                client: "::1", durationMilliseconds: "0.05", requestID: "r", rpc: "/a.B/C", status: "OK",
                userID: userID)
            var keys: [String] = []
            fields.forEachField { key, _ in keys.append(key) }
            #expect(keys == keys.sorted())
            #expect(Set(keys).count == keys.count)
            #expect(
                fields.metadata
                    == [
                        "client": "::1", "duration_ms": "0.05", "request_id": "r", "rpc": "/a.B/C", "status": "OK",
                    ].merging(userID.map { ["user_id": .string($0)] } ?? [:]) { $1 })
        }
    }

    @Test func tokenBucketsRefillAndForgetIdleKeys() {
        let limiter = RateLimiter<String>(limit: .init(perSecond: 2, burst: 3), sweepThreshold: 4)
        let start = ContinuousClock.now
        for _ in 0..<3 { #expect(limiter.acquire("a", now: start) == .allowed) }
        guard case .limited(let retryAfter) = limiter.acquire("a", now: start) else {
            Issue.record("the fourth call at once should be limited")
            return
        }
        #expect(retryAfter == .milliseconds(500))
        #expect(limiter.acquire("b", now: start) == .allowed)
        #expect(limiter.acquire("a", now: start + .milliseconds(500)) == .allowed)
        #expect(limiter.acquire("a", now: start + .milliseconds(500)) != .allowed)
        // Full buckets carry no information and go when the table is swept.
        for key in ["c", "d"] { _ = limiter.acquire(key, now: start) }
        _ = limiter.acquire("e", now: start + .seconds(10))
        #expect(limiter.trackedKeys <= 2)
    }

    @Test func bearerTokens() {
        #expect(Authenticator.bearerToken(in: ["authorization": "Bearer abc.def.ghi"]) == "abc.def.ghi")
        #expect(Authenticator.bearerToken(in: ["authorization": "bearer   xyz"]) == "xyz")
        #expect(Authenticator.bearerToken(in: ["authorization": "Basic xyz"]) == nil)
        #expect(Authenticator.bearerToken(in: ["authorization": "Bearer"]) == nil)
        #expect(Authenticator.bearerToken(in: [:]) == nil)
    }

    /// Keys rotate: a token signed with a key published after the gateway fetched its keys makes it fetch again,
    /// but made-up key ids cannot make it fetch more than once per interval.
    @Test func unknownKeyIDsTriggerOneRefetch() async throws {
        let oldKey = try SigningKey.generate()
        let newKey = try SigningKey.generate()
        let published = Shared([oldKey.verificationKey()])
        let fetches = Shared(0)
        let keys = AccessTokenKeys(refreshInterval: .seconds(300), minimumRefetchInterval: .seconds(2)) {
            fetches.update { $0 += 1 }
            return AccessTokenVerifier(issuer: "habitflow-auth", audience: "habitflow", keys: published.value)
        }
        let authenticator = Authenticator(
            keys: keys, sessions: SessionChecker(checkInterval: .seconds(2), grace: .seconds(30)) { _ in .active })
        func token(_ key: SigningKey, user: UUID = UUID()) throws -> String {
            try AccessTokenIssuer(signingKey: key, issuer: "habitflow-auth", audience: "habitflow")
                .issue(subject: user.uuidString.lowercased(), sessionID: "s", now: Date()).token
        }
        let user = UUID()
        #expect(try await authenticator.authenticate(["authorization": .text("Bearer \(try token(oldKey, user: user))")]).userID == user)
        #expect(fetches.value == 1)

        published.value.append(newKey.verificationKey())
        try await Task.sleep(for: .milliseconds(2_100))
        #expect(try await authenticator.authenticate(["authorization": .text("Bearer \(try token(newKey))")]).sessionID == "s")
        #expect(fetches.value == 2)

        let unknown = try SigningKey.generate()
        let refused = await #expect(throws: RPCError.self) {
            _ = try await authenticator.authenticate(["authorization": .text("Bearer \(try token(unknown))")])
        }
        #expect(refused?.errorReason == "TOKEN_INVALID")
        #expect(fetches.value == 2)
    }

    @Test func sessionChecksAreCachedSharedAndSurviveABriefAuthOutage() async throws {
        let checks = Shared(0)
        let answer = Shared<Result<SessionChecker.SessionState, RPCError>>(.success(.active))
        let checker = SessionChecker(checkInterval: .milliseconds(200), grace: .seconds(5)) { _ in
            checks.update { $0 += 1 }
            try await Task.sleep(for: .milliseconds(50))
            return try answer.value.get()
        }
        let caller = AuthenticatedCaller(userID: UUID(), sessionID: "s1")
        let start = ContinuousClock.now
        // Ten concurrent calls, one check.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 { group.addTask { try await checker.requireActive(caller, now: start) } }
            try await group.waitForAll()
        }
        #expect(checks.value == 1)
        try await checker.requireActive(caller, now: start + .milliseconds(100))
        #expect(checks.value == 1)

        // Auth down: the last "active" answer holds for the grace period.
        answer.value = .failure(RPCError(.unavailable, "down"))
        try await checker.requireActive(caller, now: start + .milliseconds(300))
        #expect(checks.value == 2)
        let expired = await #expect(throws: RPCError.self) {
            try await checker.requireActive(caller, now: start + .seconds(6))
        }
        #expect(expired?.code == .unavailable)

        // Revoked: refused as soon as the cached answer is older than the interval.
        answer.value = .success(.revoked)
        let refused = await #expect(throws: RPCError.self) {
            try await checker.requireActive(caller, now: start + .milliseconds(600))
        }
        #expect(refused?.errorReason == "SESSION_REVOKED")

        // Never checked and auth down: unavailable, not a guess.
        answer.value = .failure(RPCError(.unavailable, "down"))
        let unknown = await #expect(throws: RPCError.self) {
            try await checker.requireActive(AuthenticatedCaller(userID: UUID(), sessionID: "s2"))
        }
        #expect(unknown?.code == .unavailable)
    }

    @Test func sessionAnswersHoldLongerOnlyWhileEndNoticesAreLive() async throws {
        let checks = Shared(0)
        let answer = Shared<SessionChecker.SessionState>(.active)
        let checker = SessionChecker(checkInterval: .seconds(2), pushedCheckInterval: .seconds(60), grace: .seconds(30)) {
            _ in
            checks.update { $0 += 1 }
            return answer.value
        }
        let alice = AuthenticatedCaller(userID: UUID(), sessionID: "a1")
        let bob = AuthenticatedCaller(userID: UUID(), sessionID: "b1")
        let start = ContinuousClock.now

        // No notices yet: the short interval.
        try await checker.requireActive(alice, now: start)
        try await checker.requireActive(alice, now: start + .seconds(3))
        #expect(checks.value == 2)

        // Live: answers asked since the stream opened hold for the long interval, older ones do not.
        checker.noticesOpened(now: start + .seconds(4))
        try await checker.requireActive(alice, now: start + .seconds(5))
        #expect(checks.value == 3)
        try await checker.requireActive(bob, now: start + .seconds(5))
        try await checker.requireActive(alice, now: start + .seconds(30))
        try await checker.requireActive(bob, now: start + .seconds(30))
        #expect(checks.value == 4)

        // A session of Alice's ended: hers is asked again at once (even within the short interval); Bob's holds.
        checker.sessionsEnded(of: [alice.userID], now: start + .seconds(31))
        answer.value = .revoked
        let refused = await #expect(throws: RPCError.self) {
            try await checker.requireActive(alice, now: start + .seconds(31))
        }
        #expect(refused?.errorReason == "SESSION_REVOKED")
        try await checker.requireActive(bob, now: start + .seconds(31))
        #expect(checks.value == 5)

        // The stream is down: back to the short interval, and an answer from before it reopened stays short.
        checker.noticesEnded()
        answer.value = .active
        try await checker.requireActive(bob, now: start + .seconds(32))
        #expect(checks.value == 6)
        checker.noticesOpened(now: start + .seconds(33))
        try await checker.requireActive(bob, now: start + .seconds(35))
        #expect(checks.value == 7)
        try await checker.requireActive(bob, now: start + .seconds(50))
        #expect(checks.value == 7)
        // Past the long interval: asked again.
        try await checker.requireActive(bob, now: start + .seconds(96))
        #expect(checks.value == 8)
    }

    @Test func theAccessLogNamesTheRequestTheClientAndTheUser() async throws {
        let records = LogCapture()
        let key = try SigningKey.generate()
        let registry = PrometheusCollectorRegistry()
        let interceptors: [any ServerInterceptor] = [
            makeInterceptor(
                keys: keys(verifying: key), records: records, registry: registry,
                accountLimit: .init(perSecond: 0.1, burst: 1))
        ]
        let user = UUID()
        let token = try AccessTokenIssuer(signingKey: key, issuer: "habitflow-auth", audience: "habitflow")
            .issue(subject: user.uuidString.lowercased(), sessionID: "s", now: Date()).token
        func call(_ requestID: String, token: String) -> ServerContext {
            ServerContext(
                method: MethodDescriptor(service: "habitflow.habits.v1.HabitsService", method: "ListHabits"),
                requestMetadata: ["authorization": .text("Bearer \(token)"), "x-request-id": .text(requestID)],
                deadline: nil, peer: "ipv4:198.51.100.7:40000")
        }
        let first = call("request-1", token: token)
        let seenByHandler = Locked<GatewayCallInfo?>(nil)
        try await interceptors.run(context: first) { seenByHandler.withLock { $0 = GatewayCallInfo.current } }
        #expect(first.initialMetadata["x-request-id"] == "request-1")
        #expect(seenByHandler.withLock { $0 }?.caller == AuthenticatedCaller(userID: user, sessionID: "s"))
        #expect(seenByHandler.withLock { $0 }?.clientAddress == "198.51.100.7")
        // The account's only token is spent: the second call is refused, and logged as such.
        await #expect(throws: RPCError.self) { try await interceptors.run(context: call("request-2", token: token)) {} }
        // A bad token: refused before the handler runs, logged without a user.
        let refused = await #expect(throws: RPCError.self) {
            try await interceptors.run(context: call("request-3", token: "not-a-token")) {
                Issue.record("the handler must not run")
            }
        }
        #expect(refused?.code == .unauthenticated)

        let logged = records.entries.filter { $0.message == "call" }.map(\.metadata)
        #expect(logged.count == 3)
        #expect(logged.map { $0["request_id"] } == ["request-1", "request-2", "request-3"])
        #expect(logged.map { $0["user_id"] } == [user.lowercasedString, user.lowercasedString, nil])
        #expect(logged.allSatisfy { $0["client"] == "198.51.100.7" })
        #expect(logged.map { $0["status"] } == ["OK", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED"])
        #expect(logged.allSatisfy { $0["rpc"] == "/habitflow.habits.v1.HabitsService/ListHabits" })
        #expect(logged.allSatisfy { Double($0["duration_ms"] ?? "") != nil })
        // The per-RPC metrics count every call by its status.
        var exposition = [UInt8]()
        registry.emit(into: &exposition)
        let text = String(decoding: exposition, as: UTF8.self)
        for code in ["OK", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED"] {
            #expect(text.contains(#"code="\#(code)"} 1"#))
        }
    }

    /// The one admission step both paths take: decided on the spot when the caches know the token and session (or
    /// none is needed), else left to ``GatewayInterceptor/authenticate(_:_:)``, which may wait.
    @Test func admissionDecidesFromTheCachesOrLeavesItToAuthentication() async throws {
        let key = try SigningKey.generate()
        let interceptor = makeInterceptor(
            keys: keys(verifying: key), records: LogCapture(), registry: PrometheusCollectorRegistry(),
            accountLimit: .init(perSecond: 0.1, burst: 2), sessionCheckInterval: .seconds(30)
        ) { caller in
            caller.sessionID == "revoked" ? .revoked : .active
        }
        func token(session: String) throws -> String {
            try AccessTokenIssuer(signingKey: key, issuer: "habitflow-auth", audience: "habitflow")
                .issue(subject: UUID().uuidString.lowercased(), sessionID: session, now: Date()).token
        }
        func call(_ method: String = "ListHabits", service: String = "habitflow.habits.v1.HabitsService", token: String?)
            -> ServerContext
        {
            ServerContext(
                method: MethodDescriptor(service: service, method: method),
                requestMetadata: token.map { ["authorization": .text("Bearer \($0)")] } ?? [:], deadline: nil,
                peer: "ipv4:198.51.100.7:40000")
        }
        func waitingInfo(_ context: ServerContext) -> GatewayCallInfo? {
            if case .authenticating(let info) = interceptor.admit(context) { return info }
            return nil
        }
        let active = try token(session: "active")

        // Not known to the caches yet: authentication decides, with the request id already given.
        let first = call(token: active)
        var info = try #require(waitingInfo(first))
        #expect(info.caller == nil)
        #expect(info.clientAddress == "198.51.100.7")
        #expect(first.initialMetadata["x-request-id"] == info.requestID)
        // No token: authentication decides too, and refuses.
        var anonymous = try #require(waitingInfo(call(token: nil)))
        await #expect(throws: RPCError.self) { try await interceptor.authenticate(call(token: nil), &anonymous) }
        // A method that needs no token is admitted at once, without a caller.
        guard case .admitted(let signIn) = interceptor.admit(call("Login", service: "habitflow.auth.v1.AuthService", token: nil))
        else {
            Issue.record("a sign-in call is admitted without a token")
            return
        }
        #expect(signIn.caller == nil)

        // Authentication verifies the first call (one of the account's two tokens)...
        try await interceptor.authenticate(first, &info)
        #expect(info.caller?.sessionID == "active")
        // ...so the caches admit the next on the spot (the other token)...
        let second = call(token: active)
        guard case .admitted(let admitted) = interceptor.admit(second) else {
            Issue.record("a cached token of an active session is admitted")
            return
        }
        #expect(admitted.caller?.sessionID == "active")
        #expect(second.initialMetadata["x-request-id"] == admitted.requestID)
        // ...and refuse the third by the account's limit, naming the user.
        guard case .refused(let refusedInfo, let error) = interceptor.admit(call(token: active)) else {
            Issue.record("the account's limit refuses the third call")
            return
        }
        #expect(error.code == .resourceExhausted)
        #expect(refusedInfo.caller?.sessionID == "active")

        // A revoked session is cached as revoked: the caches never admit it, and authentication refuses it.
        let revoked = try token(session: "revoked")
        await #expect(throws: RPCError.self) { try await interceptor.intercept(context: call(token: revoked)) {} }
        var revokedInfo = try #require(waitingInfo(call(token: revoked)))
        await #expect(throws: RPCError.self) { try await interceptor.authenticate(call(token: revoked), &revokedInfo) }
    }

    @Test func unexpectedHandlerErrorsAreMappedToInternal() async throws {
        let records = LogCapture()
        let keys = AccessTokenKeys(refreshInterval: .seconds(300)) { throw RPCError(.unavailable, "no keys in this test") }
        let interceptor = makeInterceptor(
            keys: keys, records: records, registry: PrometheusCollectorRegistry(),
            accountLimit: .init(perSecond: 100, burst: 100))
        // A sign-in RPC: no token needed, so the handler runs, and throws something that is not an RPCError.
        let context = ServerContext(
            method: MethodDescriptor(service: "habitflow.auth.v1.AuthService", method: "Login"), requestMetadata: [:],
            deadline: nil, peer: "ipv6:[2001:db8::1]:443")
        struct Unexpected: Error {}
        let error = await #expect(throws: RPCError.self) {
            try await interceptor.intercept(context: context) { throw Unexpected() }
        }
        #expect(error?.code == .internal)
        #expect(error?.message.contains("correlation id") == true)
        let line = try #require(records.entries.first { $0.message == "call" })
        #expect(line.metadata["status"] == "INTERNAL")
        #expect(line.metadata["client"] == "2001:db8::1")
        #expect(line.metadata["user_id"] == nil)
        #expect(UUID(uuidString: line.metadata["request_id"] ?? "") != nil)
    }

    @Test("a service the gateway cannot reach: the client reads which and to retry, the log reads why (issue #28)")
    func unreachableServicesAreNamedWithoutInternals() async throws {
        struct Refused: Error, CustomStringConvertible {
            var description: String { "could not connect to 127.0.0.1:7072: Connection refused (errno: 111)" }
        }
        let unreachable = RPCError(.unavailable, "the habits service is unavailable; retry later", cause: Refused())
        let records = LogCapture()
        let keys = AccessTokenKeys(refreshInterval: .seconds(300)) {
            throw RPCError(.unavailable, "no keys in this test")
        }
        let interceptor = makeInterceptor(
            keys: keys, records: records, registry: PrometheusCollectorRegistry(),
            accountLimit: .init(perSecond: 100, burst: 100))
        let context = ServerContext(
            method: MethodDescriptor(service: "habitflow.auth.v1.AuthService", method: "Login"), requestMetadata: [:],
            deadline: nil, peer: "ipv4:198.51.100.7:443")
        let error = await #expect(throws: RPCError.self) {
            try await interceptor.intercept(context: context) { throw unreachable }
        }
        #expect(error?.code == .unavailable)
        #expect(error?.message == "the habits service is unavailable; retry later")
        let failed = try #require(records.entries.first { $0.message == "call failed" })
        #expect(failed.level == .warning)
        #expect(failed.metadata["cause"] == Refused().description)
        #expect(failed.metadata["request_id"] == records.entries.first { $0.message == "call" }?.metadata["request_id"])

        // The dashboard's missing part: the same message, the cause in the log.
        let part = DashboardService.missing(
            .habits, service: "habits", error: unreachable, logger: Logger(label: "dashboard") { _ in records })
        #expect(part.code == Int32(RPCStatusCode.unavailable.rawValue))
        #expect(part.message == "the habits service is unavailable; retry later")
        let missing = try #require(records.entries.first { $0.message == "dashboard part missing" })
        #expect(missing.metadata["error"]?.contains("errno: 111") == true)
        struct NotAnRPCError: Error {}
        let other = DashboardService.missing(
            .goals, service: "goals", error: NotAnRPCError(), logger: Logger(label: "dashboard") { _ in records })
        #expect(other.message == "the goals service could not give this part (UNKNOWN)")
    }

    @Test func configurationFromTheEnvironment() throws {
        let service = try ServiceConfiguration.fromEnvironment(service: "gateway", environment: [:])
        #expect(service.port == 7070)
        let defaults = try GatewayConfiguration.fromEnvironment(service, environment: [:])
        #expect(defaults.tls == nil)
        #expect(defaults.defaultTimeout == .seconds(30))

        let configured = try GatewayConfiguration.fromEnvironment(
            service,
            environment: [
                "HABITFLOW_GATEWAY_TLS_CERT": "/c.pem", "HABITFLOW_GATEWAY_TLS_KEY": "/k.pem",
                "HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT": "5", "HABITFLOW_GATEWAY_ACCOUNT_RATE_BURST": "7",
                "HABITFLOW_GATEWAY_DEFAULT_TIMEOUT_MS": "1500", "HABITFLOW_GATEWAY_MAX_MESSAGE_BYTES": "1024",
                "HABITFLOW_GATEWAY_TOKEN_LEEWAY_MS": "0", "HABITFLOW_GATEWAY_SESSION_CHECK_PUSHED_MS": "60000",
            ])
        #expect(configured.tls == .init(certificatePath: "/c.pem", privateKeyPath: "/k.pem"))
        #expect(configured.addressRateLimit.perSecond == 5)
        #expect(configured.accountRateLimit.burst == 7)
        #expect(configured.defaultTimeout == .milliseconds(1500))
        #expect(configured.maxMessageSize == 1024)
        #expect(configured.tokenLeeway == .zero)
        #expect(defaults.pushedSessionCheckInterval == .seconds(300))
        #expect(configured.pushedSessionCheckInterval == .seconds(60))
        #expect(defaults.cors == nil)
        #expect(configured.cors == nil)

        let cors = try GatewayConfiguration.fromEnvironment(
            service, environment: ["HABITFLOW_CORS_ORIGINS": "http://localhost:5173, https://app.example"])
        #expect(cors.cors?.allows(origin: "https://app.example") == true)
        #expect(cors.cors?.allows(origin: "https://other.example") == false)
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.fromEnvironment(service, environment: ["HABITFLOW_CORS_ORIGINS": " , "])
        }

        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.fromEnvironment(service, environment: ["HABITFLOW_GATEWAY_TLS_CERT": "/c.pem"])
        }
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.fromEnvironment(service, environment: ["HABITFLOW_GATEWAY_DEFAULT_TIMEOUT_MS": "-1"])
        }
    }
}

/// Auth's published keys, as the gateway fetches them, holding `key`'s public half.
private func keys(verifying key: SigningKey) -> AccessTokenKeys {
    AccessTokenKeys(refreshInterval: .seconds(300)) {
        AccessTokenVerifier(issuer: "habitflow-auth", audience: "habitflow", keys: [key.verificationKey()])
    }
}

/// The gateway's interceptor as the gateway builds it, logging to `records` and counting in `registry`, with an
/// address limit no test reaches and sessions as `session` says.
private func makeInterceptor(
    keys: AccessTokenKeys, records: LogCapture, registry: PrometheusCollectorRegistry,
    accountLimit: GatewayConfiguration.RateLimit, sessionCheckInterval: Duration = .seconds(2),
    session: @escaping SessionChecker.Check = { _ in .active }
) -> GatewayInterceptor {
    let logger = Logger(label: "access-log") { _ in records }
    return GatewayInterceptor(
        logger: logger, rpcMetrics: RPCMetricsInterceptor(registry: registry),
        errorMapping: ErrorMappingServerInterceptor(logger: logger),
        addressLimiter: RateLimiter(limit: .init(perSecond: 100, burst: 100)),
        authenticator: Authenticator(
            keys: keys, sessions: SessionChecker(checkInterval: sessionCheckInterval, grace: .seconds(30), check: session)),
        accountLimiter: RateLimiter(limit: accountLimit), metrics: GatewayMetrics(registry: registry))
}
