import HabitFlowBase64
import Foundation
import HabitFlowAuthProtos
import HabitFlowCrypto
import HabitFlowEvents
import HabitFlowRPC
import HabitFlowTestSupport
import HabitFlowTokens
import Testing

@testable import HabitFlowAuth

extension AuthServiceTests {
    @Suite("registration")
    struct RegistrationTests {
        @Test("register creates the account, signs it in and publishes UserCreated")
        func register() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register(timeZone: "America/New_York")
                let user = registered.user
                #expect(user.emailVerified == false)
                #expect(user.passwordSet)
                #expect(user.timeZone == "America/New_York")
                #expect(user.displayName == user.username)
                #expect(registered.tokens.tokenType == "Bearer")

                // The access token is what the gateway will verify with the published keys.
                let claims = try await env.accessTokenVerifier().verify(
                    registered.tokens.accessToken, now: env.clock.now())
                #expect(claims.subject == user.id)
                #expect(claims.sessionID == registered.tokens.sessionID)
                #expect(claims.issuer == "habitflow-auth")
                #expect(claims.audience == "habitflow")
                #expect(abs(claims.expiresAt.timeIntervalSince(env.clock.now()) - 24 * 3600) < 2)
                let refreshLifetime = registered.tokens.refreshTokenExpireTime.date.timeIntervalSince(env.clock.now())
                #expect(abs(refreshLifetime - 30 * 24 * 3600) < 2)

                // Stored: bcrypt, never the password; the refresh token only as its hash.
                let row = try #require(
                    try await env.pool.queryRow("SELECT password_hash FROM users WHERE id = \(registered.id)"))
                let hash = try row.decode(0, as: String.self)
                #expect(hash.hasPrefix("$2b$04$"))
                #expect(BCrypt.verify(registered.password, against: hash))
                let stored = try await env.pool.query(
                    "SELECT token_hash FROM refresh_tokens WHERE user_id = \(registered.id)")
                #expect(stored.count == 1)
                #expect(
                    try stored[0].decode(0, as: Data.self)
                        == Data(SHA256.hash(Base64URL.decode(registered.tokens.refreshToken) ?? [])))

                let delivered = try await eventually(timeout: .seconds(30)) {
                    !env.events.events("habitflow.events.v1.UserCreated", aggregateID: user.id).isEmpty
                }
                #expect(delivered)
                let envelope = try #require(
                    env.events.events("habitflow.events.v1.UserCreated", aggregateID: user.id).first)
                let event = try Habitflow_Events_V1_UserCreated(serializedBytes: envelope.payload)
                #expect(event.userID == user.id)
                #expect(event.username == user.username)
                #expect(event.displayName == user.displayName)
                #expect(event.timeZone == "America/New_York")
                #expect(envelope.source == "auth")
            }
        }

        @Test("invalid fields are INVALID_ARGUMENT with one violation per broken rule")
        func invalidFields() async throws {
            try await AuthTestEnvironment.run { env in
                var request = Habitflow_Auth_V1_RegisterRequest()
                request.email = "not-an-email"
                request.username = "a"
                request.password = "short"
                request.timeZone = "GMT+2"
                request.displayName = "bad\u{7}name"
                request.device.deviceID = "not-a-uuid"
                let error = await env.error { try await env.auth.register(request) }
                #expect(error?.code == .invalidArgument)
                let fields = Set(error?.fieldViolations.map(\.field) ?? [])
                #expect(fields == ["email", "username", "password", "time_zone", "display_name", "device.device_id"])

                // The password must not be the email, nor longer than bcrypt reads, nor empty.
                var sameAsEmail = Habitflow_Auth_V1_RegisterRequest()
                sameAsEmail.email = "Someone@Example.com"
                sameAsEmail.username = "someone_\(UUID().uuidString.prefix(6))"
                sameAsEmail.password = "someone@example.com"
                let same = await env.error { try await env.auth.register(sameAsEmail) }
                #expect(same?.fieldViolations.map(\.field) == ["password"])
                sameAsEmail.password = String(repeating: "é", count: 37)  // 74 bytes
                let long = await env.error { try await env.auth.register(sameAsEmail) }
                #expect(long?.fieldViolations.first?.description.contains("72 bytes") == true)
                let empty = await env.error { try await env.auth.register(Habitflow_Auth_V1_RegisterRequest()) }
                #expect(Set(empty?.fieldViolations.map(\.field) ?? []) == ["email", "username", "password"])
            }
        }

        @Test("a taken email or username (ignoring case) is ALREADY_EXISTS")
        func duplicates() async throws {
            try await AuthTestEnvironment.run { env in
                let existing = try await env.register()
                var request = Habitflow_Auth_V1_RegisterRequest()
                request.email = existing.user.email.uppercased()
                request.username = "other_\(UUID().uuidString.prefix(8))"
                request.password = "another password"
                let emailTaken = await env.error { try await env.auth.register(request) }
                #expect(emailTaken?.code == .alreadyExists)
                #expect(emailTaken?.message.contains("email") == true)

                request.email = "other-\(UUID().uuidString.prefix(8))@example.com"
                request.username = existing.user.username.uppercased()
                let usernameTaken = await env.error { try await env.auth.register(request) }
                #expect(usernameTaken?.code == .alreadyExists)
                #expect(usernameTaken?.message.contains("username") == true)
            }
        }

        @Test("concurrent registrations of one email: exactly one wins, the others are ALREADY_EXISTS")
        func concurrentRegistrations() async throws {
            try await AuthTestEnvironment.run { env in
                let email = "race-\(UUID().uuidString.prefix(8))@example.com"
                let outcomes = try await withThrowingTaskGroup(of: RPCStatusCode.self) { group in
                    for index in 0..<6 {
                        group.addTask {
                            var request = Habitflow_Auth_V1_RegisterRequest()
                            request.email = email
                            request.username = "racer\(index)_\(UUID().uuidString.prefix(6))"
                            request.password = "racing password"
                            do {
                                _ = try await env.auth.register(request)
                                return .ok
                            } catch let error as RPCError {
                                return error.code
                            }
                        }
                    }
                    return try await group.reduce(into: [RPCStatusCode]()) { $0.append($1) }
                }
                #expect(outcomes.filter { $0 == .ok }.count == 1)
                #expect(outcomes.filter { $0 == .alreadyExists }.count == 5)
                let count = try await env.pool.queryRow(
                    "SELECT count(*) FROM users WHERE lower(email) = lower(\(email))")
                #expect(try count?.decode(0, as: Int.self) == 1)
            }
        }
    }

    @Suite("login and throttling")
    struct LoginTests {
        @Test("login by email (any case) or username; wrong password and unknown account answer alike")
        func login() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let byEmail = try await env.login(
                    email: registered.user.email.uppercased(), password: registered.password)
                #expect(byEmail.user.id == registered.user.id)
                #expect(byEmail.tokens.sessionID != registered.tokens.sessionID)

                var byUsername = Habitflow_Auth_V1_LoginRequest()
                byUsername.username = registered.user.username
                byUsername.password = registered.password
                #expect(try await env.auth.login(byUsername).user.id == registered.user.id)

                let wrong = await env.error {
                    try await env.login(email: registered.user.email, password: "wrong password")
                }
                let unknown = await env.error {
                    try await env.login(
                        email: "nobody-\(UUID().uuidString.prefix(8))@example.com", password: "wrong password")
                }
                #expect(wrong?.code == .unauthenticated)
                #expect(wrong?.message == unknown?.message)
                #expect(wrong?.errorReason == "INVALID_CREDENTIALS")
                #expect(unknown?.errorReason == "INVALID_CREDENTIALS")

                let missing = await env.error { try await env.auth.login(Habitflow_Auth_V1_LoginRequest()) }
                #expect(Set(missing?.fieldViolations.map(\.field) ?? []) == ["identifier", "password"])
            }
        }

        @Test("failed logins per account back off with RESOURCE_EXHAUSTED and a retry delay; success clears them")
        func accountThrottling() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                for attempt in 1...5 {
                    let error = await env.error {
                        try await env.login(
                            email: registered.user.email, password: "guess \(attempt)",
                            clientAddress: "198.51.100.\(attempt)")
                    }
                    #expect(error?.code == .unauthenticated)
                }
                // The sixth failure is over the limit: from now on even the right password must wait.
                _ = await env.error {
                    try await env.login(
                        email: registered.user.email, password: "guess 6", clientAddress: "198.51.100.6")
                }
                let throttled = await env.error {
                    try await env.login(
                        email: registered.user.email, password: registered.password, clientAddress: "198.51.100.7")
                }
                #expect(throttled?.code == .resourceExhausted)
                let delay = try #require(throttled?.retryDelay)
                #expect(delay > .zero && delay <= .seconds(2) + .milliseconds(5))

                env.clock.advance(by: delay + .milliseconds(10))
                let success = try await env.login(email: registered.user.email, password: registered.password)
                #expect(success.user.id == registered.user.id)
                // The success cleared the count: a new mistake is an ordinary failure again.
                let again = await env.error { try await env.login(email: registered.user.email, password: "one more") }
                #expect(again?.code == .unauthenticated)
            }
        }

        @Test("failed logins per client address back off too, across accounts; unknown accounts are throttled alike")
        func addressThrottling() async throws {
            try await AuthTestEnvironment.run(configure: { settings in
                settings.loginAddressThrottle = ThrottlePolicy(
                    freeAttempts: 3, window: .seconds(900), initialDelay: .seconds(5), maximumDelay: .seconds(60))
            }) { env in
                let address = "192.0.2.\(Int.random(in: 1...250))"
                for attempt in 0..<4 {
                    _ = await env.error {
                        try await env.login(
                            email: "ghost\(attempt)-\(UUID().uuidString.prefix(6))@example.com", password: "x1234567",
                            clientAddress: address)
                    }
                }
                let registered = try await env.register()
                let blocked = await env.error {
                    try await env.login(
                        email: registered.user.email, password: registered.password, clientAddress: address)
                }
                #expect(blocked?.code == .resourceExhausted)
                #expect(blocked?.retryDelay != nil)
                // Another address is not affected.
                _ = try await env.login(
                    email: registered.user.email, password: registered.password, clientAddress: "192.0.2.251")

                // An unknown account is counted under its identifier, exactly like a real one.
                let ghost = "ghost-\(UUID().uuidString.prefix(8))@example.com"
                for attempt in 1...6 {
                    _ = await env.error {
                        try await env.login(email: ghost, password: "x1234567", clientAddress: "10.1.0.\(attempt)")
                    }
                }
                let ghostBlocked = await env.error {
                    try await env.login(email: ghost, password: "x1234567", clientAddress: "10.1.0.99")
                }
                #expect(ghostBlocked?.code == .resourceExhausted)
            }
        }

        @Test("one session per device: signing in again on a device replaces its session")
        func oneSessionPerDevice() async throws {
            try await AuthTestEnvironment.run { env in
                let device = UUID()
                let registered = try await env.register(deviceID: device)
                let second = try await env.login(
                    email: registered.user.email, password: registered.password, deviceID: device)
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .revoked)
                #expect(try await env.sessionState(second.tokens, userID: registered.user.id) == .active)
                let other = try await env.login(
                    email: registered.user.email, password: registered.password, deviceID: UUID())
                var options = registered.options
                options = .onBehalf(of: registered.id, sessionID: other.tokens.sessionID)
                let sessions = try await env.auth.listSessions(
                    Habitflow_Auth_V1_ListSessionsRequest(), options: options
                ).sessions
                #expect(Set(sessions.map(\.id)) == [second.tokens.sessionID, other.tokens.sessionID])
                #expect(sessions.first { $0.id == second.tokens.sessionID }?.deviceID == device.uuidString.lowercased())
                // The replaced session's refresh token is dead.
                let replaced = await env.error { try await env.refresh(registered.tokens.refreshToken) }
                #expect(replaced?.code == .unauthenticated)
            }
        }
    }
}
