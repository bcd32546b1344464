import HabitFlowBase64
import Foundation
import HabitFlowAuthProtos
import HabitFlowCrypto
import HabitFlowEvents
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import HabitFlowTokens
import Testing

@testable import HabitFlowAuth

/// Stand-ins for Google (RS256) and Apple (ES256): keys the test generates, published as JWKS files the service is
/// configured with, and ID tokens signed with them.
struct FakeIdentityProviders {
    static let googleClientID = "habitflow-ios.apps.googleusercontent.com"
    static let appleClientID = "app.habitflow.ios"

    let googleKey: RSA.PrivateKey
    let appleKey: P256.PrivateKey
    let directory: URL

    init() throws {
        googleKey = try RSA.PrivateKey()
        appleKey = try P256.PrivateKey()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("auth-social-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let google = JSONWebKeySet(keys: [JSONWebKey(keyID: "google-1", publicKey: .rsa(googleKey.publicKey))])
        let apple = JSONWebKeySet(keys: [JSONWebKey(keyID: "apple-1", publicKey: .p256(appleKey.publicKey))])
        try google.json().write(to: directory.appendingPathComponent("google.json"))
        try apple.json().write(to: directory.appendingPathComponent("apple.json"))
    }

    func configure(_ settings: inout AuthSettings, apple: Bool = true) {
        settings.google = SocialProviderSettings(
            issuers: SocialProviderSettings.googleIssuers, clientIDs: [Self.googleClientID],
            keys: .file(directory.appendingPathComponent("google.json").path))
        if apple {
            settings.apple = SocialProviderSettings(
                issuers: SocialProviderSettings.appleIssuers, clientIDs: [Self.appleClientID],
                keys: .file(directory.appendingPathComponent("apple.json").path))
        }
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// A Google ID token (RS256) with these claims; `nil` leaves a claim out.
    func googleToken(
        subject: String, email: String?, emailVerified: Any? = true, now: Date,
        audience: String = FakeIdentityProviders.googleClientID,
        issuer: String = "https://accounts.google.com", lifetime: TimeInterval = 3600, nonce: String? = nil,
        keyID: String = "google-1", algorithm: String = "RS256", signer: (([UInt8]) throws -> [UInt8])? = nil
    ) throws -> String {
        try Self.token(
            header: ["alg": algorithm, "kid": keyID, "typ": "JWT"],
            claims: [
                "iss": issuer, "aud": audience, "sub": subject, "email": email, "email_verified": emailVerified,
                "iat": Int(now.timeIntervalSince1970), "exp": Int(now.timeIntervalSince1970 + lifetime), "nonce": nonce,
            ],
            sign: signer ?? { try googleKey.signature(for: $0) })
    }

    /// An Apple ID token (ES256); Apple sends `email_verified` as a string.
    func appleToken(subject: String, email: String?, now: Date, nonce: String? = nil) throws -> String {
        try Self.token(
            header: ["alg": "ES256", "kid": "apple-1"],
            claims: [
                "iss": "https://appleid.apple.com", "aud": Self.appleClientID, "sub": subject, "email": email,
                "email_verified": "true", "iat": Int(now.timeIntervalSince1970),
                "exp": Int(now.timeIntervalSince1970 + 600), "nonce": nonce,
            ],
            sign: { try appleKey.signature(for: $0) })
    }

    static func token(header: [String: Any], claims: [String: Any?], sign: ([UInt8]) throws -> [UInt8]) throws -> String
    {
        let headerJSON = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        let claimsJSON = try JSONSerialization.data(
            withJSONObject: claims.compactMapValues { $0 }, options: [.sortedKeys])
        let input = Base64URL.encode(Array(headerJSON)) + "." + Base64URL.encode(Array(claimsJSON))
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }
}

extension AuthServiceTests {
    @Suite("social login (Google RS256, Apple ES256, keys from JWKS files)")
    struct SocialLoginTests {
        /// Runs `body` with both providers configured.
        func withProviders(
            apple: Bool = true, _ body: (AuthTestEnvironment, FakeIdentityProviders) async throws -> Void
        ) async throws {
            let providers = try FakeIdentityProviders()
            defer { providers.remove() }
            try await AuthTestEnvironment.run(configure: { providers.configure(&$0, apple: apple) }) { env in
                try await body(env, providers)
            }
        }

        func socialLogin(
            _ env: AuthTestEnvironment, _ provider: Habitflow_Auth_V1_SocialProvider, _ token: String,
            nonce: String = ""
        ) async throws -> Habitflow_Auth_V1_SocialLoginResponse {
            var request = Habitflow_Auth_V1_SocialLoginRequest()
            request.credential.provider = provider
            request.credential.idToken = token
            request.credential.nonce = nonce
            request.device.deviceName = "social test"
            request.timeZone = "Europe/Madrid"
            return try await env.auth.socialLogin(request, options: .fromClient("203.0.113.20"))
        }

        @Test("a new Google identity with a verified email creates an account without a password; again, signs in")
        func createsAccount() async throws {
            try await withProviders { env, providers in
                let subject = "google-\(UUID().uuidString)"
                let email = "sam.\(UUID().uuidString.prefix(6).lowercased())@gmail.com"
                let token = try providers.googleToken(subject: subject, email: email, now: env.clock.now())
                let first = try await socialLogin(env, .google, token)
                #expect(first.created)
                #expect(first.user.email == email)
                #expect(first.user.emailVerified)
                #expect(!first.user.passwordSet)
                #expect(first.user.linkedProviders == [.google])
                #expect(first.user.timeZone == "Europe/Madrid")
                #expect(first.user.username.hasPrefix("sam."))
                _ = try await env.accessTokenVerifier().verify(first.tokens.accessToken, now: env.clock.now())
                #expect(
                    try await eventually(timeout: .seconds(30)) {
                        !env.events.events("habitflow.events.v1.UserCreated", aggregateID: first.user.id).isEmpty
                    })

                let again = try await socialLogin(env, .google, token)
                #expect(!again.created)
                #expect(again.user.id == first.user.id)
                #expect(again.tokens.sessionID != first.tokens.sessionID)
                // No password to guess.
                #expect(
                    await env.error { try await env.login(email: email, password: "anything at all") }?.code
                        == .unauthenticated)
                var change = Habitflow_Auth_V1_ChangePasswordRequest()
                change.currentPassword = "x"
                change.newPassword = "a new password"
                let options = CallOptions.onBehalf(
                    of: UUID(uuidString: first.user.id)!, sessionID: first.tokens.sessionID)
                #expect(
                    await env.error { try await env.auth.changePassword(change, options: options) }?.code
                        == .failedPrecondition)

                // The same local part again: another username.
                let twin = "sam.\(first.user.username.dropFirst(4))@icloud.com"
                let twinToken = try providers.googleToken(
                    subject: "google-\(UUID().uuidString)", email: twin, now: env.clock.now())
                let other = try await socialLogin(env, .google, twinToken)
                #expect(other.created)
                #expect(other.user.username != first.user.username)
                #expect(other.user.username.hasPrefix(first.user.username))
            }
        }

        @Test("Apple ES256 tokens with a string email_verified and a matching nonce sign in")
        func apple() async throws {
            try await withProviders { env, providers in
                let email = "apple-\(UUID().uuidString.prefix(8).lowercased())@privaterelay.appleid.com"
                let token = try providers.appleToken(
                    subject: "001234.\(UUID().uuidString)", email: email, now: env.clock.now(), nonce: "n-0S6_WzA2Mj")
                let response = try await socialLogin(env, .apple, token, nonce: "n-0S6_WzA2Mj")
                #expect(response.created)
                #expect(response.user.linkedProviders == [.apple])
                let mismatch = await env.error { try await socialLogin(env, .apple, token, nonce: "another-nonce") }
                #expect(mismatch?.errorReason == "ID_TOKEN_INVALID")
            }
        }

        @Test("an account with the verified email is linked and keeps its password and sessions")
        func linksVerifiedAccount() async throws {
            try await withProviders { env, providers in
                let registered = try await env.register()
                try await env.pool.execute("UPDATE users SET email_verified = true WHERE id = \(registered.id)")
                let token = try providers.googleToken(
                    subject: "google-\(UUID().uuidString)", email: registered.user.email.uppercased(),
                    now: env.clock.now())
                let response = try await socialLogin(env, .google, token)
                #expect(!response.created)
                #expect(response.user.id == registered.user.id)
                #expect(response.user.passwordSet)
                #expect(response.user.linkedProviders == [.google])
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .active)
                _ = try await env.login(email: registered.user.email, password: registered.password)
            }
        }

        @Test("an unverified account with that email is taken over by the provider's owner: password and sessions end")
        func preHijackingDefense() async throws {
            try await withProviders { env, providers in
                // Someone registered the address without proving it is theirs.
                let squatter = try await env.register()
                let token = try providers.googleToken(
                    subject: "google-\(UUID().uuidString)", email: squatter.user.email, now: env.clock.now())
                let owner = try await socialLogin(env, .google, token)
                #expect(owner.user.id == squatter.user.id)
                #expect(!owner.user.passwordSet)
                #expect(owner.user.emailVerified)
                #expect(try await env.sessionState(squatter.tokens, userID: squatter.user.id) == .revoked)
                #expect(
                    await env.error { try await env.login(email: squatter.user.email, password: squatter.password) }?
                        .code == .unauthenticated)
            }
        }

        @Test("forged, expired, foreign and malformed ID tokens are refused")
        func refusals() async throws {
            try await withProviders(apple: false) { env, providers in
                let now = env.clock.now()
                let email = "x-\(UUID().uuidString.prefix(6).lowercased())@gmail.com"
                let otherKey = try RSA.PrivateKey()
                let cases: [(String, String)] = [
                    (
                        "wrong audience",
                        try providers.googleToken(subject: "s", email: email, now: now, audience: "someone-else")
                    ),
                    (
                        "wrong issuer",
                        try providers.googleToken(subject: "s", email: email, now: now, issuer: "https://evil.example")
                    ),
                    (
                        "expired",
                        try providers.googleToken(subject: "s", email: email, now: now.addingTimeInterval(-7200))
                    ),
                    (
                        "signed by another key",
                        try providers.googleToken(
                            subject: "s", email: email, now: now, signer: { try otherKey.signature(for: $0) })
                    ),
                    (
                        "unknown key id",
                        try providers.googleToken(subject: "s", email: email, now: now, keyID: "google-9")
                    ),
                    (
                        "alg none",
                        try providers.googleToken(
                            subject: "s", email: email, now: now, algorithm: "none", signer: { _ in [] })
                    ),
                    ("HS256", try providers.googleToken(subject: "s", email: email, now: now, algorithm: "HS256")),
                    ("garbage", "not.a.token"),
                ]
                for (name, token) in cases {
                    let error = await env.error { try await socialLogin(env, .google, token) }
                    #expect(error?.code == .unauthenticated, "\(name)")
                    #expect(error?.errorReason == "ID_TOKEN_INVALID", "\(name)")
                }
                let unverified = try providers.googleToken(subject: "s2", email: email, emailVerified: false, now: now)
                #expect(
                    await env.error { try await socialLogin(env, .google, unverified) }?.code == .failedPrecondition)
                let noEmail = try providers.googleToken(subject: "s3", email: nil, now: now)
                #expect(await env.error { try await socialLogin(env, .google, noEmail) }?.code == .failedPrecondition)

                let apple = try providers.appleToken(subject: "s4", email: email, now: now)
                let notConfigured = await env.error { try await socialLogin(env, .apple, apple) }
                #expect(notConfigured?.code == .failedPrecondition)
                let unspecified = await env.error { try await socialLogin(env, .unspecified, apple) }
                #expect(unspecified?.fieldViolations.map(\.field) == ["credential.provider"])
                let missing = await env.error { try await env.auth.socialLogin(Habitflow_Auth_V1_SocialLoginRequest()) }
                #expect(missing?.fieldViolations.map(\.field) == ["credential"])
            }
        }

        @Test("an account without a password is deleted with a fresh ID token of its own identity")
        func deleteSocialAccount() async throws {
            try await withProviders { env, providers in
                let subject = "google-\(UUID().uuidString)"
                let email = "del-\(UUID().uuidString.prefix(6).lowercased())@gmail.com"
                let created = try await socialLogin(
                    env, .google, try providers.googleToken(subject: subject, email: email, now: env.clock.now()))
                let options = CallOptions.onBehalf(
                    of: UUID(uuidString: created.user.id)!, sessionID: created.tokens.sessionID)
                var request = Habitflow_Auth_V1_DeleteAccountRequest()
                #expect(
                    await env.error { try await env.auth.deleteAccount(request, options: options) }?.fieldViolations
                        .map(\.field) == ["social_credential"])
                request.socialCredential.provider = .google
                request.socialCredential.idToken = try providers.googleToken(
                    subject: "google-someone-else", email: email, now: env.clock.now())
                #expect(
                    await env.error { try await env.auth.deleteAccount(request, options: options) }?.code
                        == .permissionDenied)
                request.socialCredential.idToken = try providers.googleToken(
                    subject: subject, email: email, now: env.clock.now())
                _ = try await env.auth.deleteAccount(request, options: options)
                #expect(try await env.sessionState(created.tokens, userID: created.user.id) == .notFound)
                #expect(
                    try await eventually(timeout: .seconds(30)) {
                        !env.events.events("habitflow.events.v1.UserDeleted", aggregateID: created.user.id).isEmpty
                    })
                // Signing in again starts a new account.
                let again = try await socialLogin(
                    env, .google, try providers.googleToken(subject: subject, email: email, now: env.clock.now()))
                #expect(again.created)
                #expect(again.user.id != created.user.id)
            }
        }
    }
}
