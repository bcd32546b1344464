import Foundation
import HabitFlowCrypto
@testable import HabitFlowGateway
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import HabitFlowTokens
import Synchronization
import Testing

/// The gateway's parts on their own: caches, limits, metadata shaping, configuration.
@Suite struct GatewayUnitTests {
    @Test func forwardedCallsCarryTheGatewaysIdentityOnly() async throws {
        let caller = AuthenticatedCaller(userID: UUID(), sessionID: "session-1")
        let info = GatewayCallInfo(requestID: "request-7", clientAddress: "203.0.113.9")
        var options = CallOptions()
        options.metadata.add("authorization", "Bearer secret")
        options.metadata.add("x-habitflow-user-id", UUID().uuidString)
        options.metadata.add("x-habitflow-internal-auth", "forged")
        options.metadata.add("x-app-version", "1.2")
        AuthenticatedCaller.$current.withValue(caller) {
            GatewayCallInfo.$current.withValue(info) {
                Gateway.prepareForwardedCall(&options, defaultTimeout: .seconds(30))
            }
        }
        #expect(options.metadata["authorization"] == nil)
        #expect(options.metadata["x-habitflow-internal-auth"] == nil)
        #expect(options.metadata.values("x-habitflow-user-id") == [.text(caller.userID.uuidString.lowercased())])
        #expect(options.metadata["x-habitflow-session-id"] == "session-1")
        #expect(options.metadata["x-habitflow-client-address"] == "203.0.113.9")
        #expect(options.metadata["x-request-id"] == "request-7")
        #expect(options.metadata["x-app-version"] == "1.2")
        #expect(options.timeout == .seconds(30))

        // A call with its own deadline keeps it.
        var withDeadline = CallOptions(deadline: .now + .seconds(2))
        Gateway.prepareForwardedCall(&withDeadline, defaultTimeout: .seconds(30))
        #expect(withDeadline.timeout == nil)
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

    @Test func tokenBucketsRefillAndForgetIdleKeys() {
        let limiter = RateLimiter(limit: .init(perSecond: 2, burst: 3), sweepThreshold: 4)
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
        let keys = AccessTokenKeys(refreshInterval: .seconds(300), minimumRefetchInterval: .milliseconds(300)) {
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
        try await Task.sleep(for: .milliseconds(350))
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
        // Ten concurrent calls, one check.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 { group.addTask { try await checker.requireActive(caller) } }
            try await group.waitForAll()
        }
        #expect(checks.value == 1)
        try await checker.requireActive(caller)
        #expect(checks.value == 1)

        // Auth down: the last "active" answer holds for the grace period.
        answer.value = .failure(RPCError(.unavailable, "down"))
        try await Task.sleep(for: .milliseconds(250))
        try await checker.requireActive(caller)
        #expect(checks.value == 2)

        // Revoked: refused as soon as the cached answer is older than the interval.
        answer.value = .success(.revoked)
        try await Task.sleep(for: .milliseconds(250))
        let refused = await #expect(throws: RPCError.self) { try await checker.requireActive(caller) }
        #expect(refused?.errorReason == "SESSION_REVOKED")

        // Never checked and auth down: unavailable, not a guess.
        answer.value = .failure(RPCError(.unavailable, "down"))
        let unknown = await #expect(throws: RPCError.self) {
            try await checker.requireActive(AuthenticatedCaller(userID: UUID(), sessionID: "s2"))
        }
        #expect(unknown?.code == .unavailable)
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
                "HABITFLOW_GATEWAY_TOKEN_LEEWAY_MS": "0",
            ])
        #expect(configured.tls == .init(certificatePath: "/c.pem", privateKeyPath: "/k.pem"))
        #expect(configured.addressRateLimit.perSecond == 5)
        #expect(configured.accountRateLimit.burst == 7)
        #expect(configured.defaultTimeout == .milliseconds(1500))
        #expect(configured.maxMessageSize == 1024)
        #expect(configured.tokenLeeway == .zero)

        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.fromEnvironment(service, environment: ["HABITFLOW_GATEWAY_TLS_CERT": "/c.pem"])
        }
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.fromEnvironment(service, environment: ["HABITFLOW_GATEWAY_DEFAULT_TIMEOUT_MS": "-1"])
        }
    }
}
