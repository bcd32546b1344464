import HabitFlowBase64
import Foundation
import HabitFlowAuthProtos
import HabitFlowCrypto
import HabitFlowRPC
import HabitFlowTokens
import Testing

@testable import HabitFlowAuth

extension AuthServiceTests {
    @Suite("refresh tokens, access tokens and signing keys")
    struct TokenTests {
        @Test("refresh rotates the token; presenting a used one revokes the whole session")
        func refreshRotationAndReuse() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let first = try await env.refresh(registered.tokens.refreshToken)
                #expect(first.sessionID == registered.tokens.sessionID)
                #expect(first.refreshToken != registered.tokens.refreshToken)
                let second = try await env.refresh(first.refreshToken)
                #expect(second.sessionID == registered.tokens.sessionID)
                _ = try await env.accessTokenVerifier().verify(second.accessToken, now: env.clock.now())

                // The first token again: someone else has it. The session ends, for the thief and the owner alike.
                let reuse = await env.error { try await env.refresh(registered.tokens.refreshToken) }
                #expect(reuse?.code == .unauthenticated)
                #expect(reuse?.errorReason == "REFRESH_TOKEN_REUSED")
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .revoked)
                let latest = await env.error { try await env.refresh(second.refreshToken) }
                #expect(latest?.errorReason == "REFRESH_TOKEN_INVALID")
            }
        }

        @Test("of concurrent uses of one refresh token, one rotates it and the others revoke the session as a reuse")
        func concurrentRefreshes() async throws {
            try await AuthTestEnvironment.run { env in
                // Races between the one-statement refresh and the transaction behind it (which a reuse takes):
                // enough rounds that a lock-order deadlock between the two would show.
                for _ in 0..<20 {
                    let registered = try await env.register()
                    let token = registered.tokens.refreshToken
                    let outcomes = await withTaskGroup(of: String.self) { group in
                        for _ in 0..<4 {
                            group.addTask {
                                do {
                                    _ = try await env.refresh(token)
                                    return "rotated"
                                } catch {
                                    return (error as? RPCError)?.errorReason ?? "\(error)"
                                }
                            }
                        }
                        return await group.reduce(into: []) { $0.append($1) }
                    }
                    #expect(outcomes.sorted() == ["REFRESH_TOKEN_REUSED", "REFRESH_TOKEN_REUSED", "REFRESH_TOKEN_REUSED", "rotated"])
                    #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .revoked)
                }
            }
        }

        @Test("a refresh token of a session that ended is refused and rotates nothing")
        func refreshOfAnEndedSession() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let sessionID = try #require(UUID(uuidString: registered.tokens.sessionID))
                try await env.pool.execute(
                    "UPDATE sessions SET revoked_at = now(), revoke_reason = 'logout' WHERE id = \(sessionID)")
                let ended = await env.error { try await env.refresh(registered.tokens.refreshToken) }
                #expect(ended?.errorReason == "REFRESH_TOKEN_INVALID")
                let tokens = try await env.pool.queryRow(
                    "SELECT count(*), count(used_at) FROM refresh_tokens WHERE session_id = \(sessionID)")
                #expect(try tokens?.decode(0, as: Int64.self) == 1)
                #expect(try tokens?.decode(1, as: Int64.self) == 0)
            }
        }

        @Test("unknown, malformed and empty refresh tokens are refused")
        func invalidRefreshTokens() async throws {
            try await AuthTestEnvironment.run { env in
                let random = Base64URL.encode(SecureRandom.bytes(32))
                for token in [random, "not a token", String(repeating: "A", count: 43), random + "A"] {
                    let error = await env.error { try await env.refresh(token) }
                    #expect(error?.code == .unauthenticated)
                    #expect(error?.errorReason == "REFRESH_TOKEN_INVALID")
                }
                let empty = await env.error { try await env.refresh("") }
                #expect(empty?.code == .invalidArgument)
            }
        }

        @Test("refresh tokens and sessions expire after 30 days, access tokens after 24 hours (injected clock)")
        func expiry() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let verifier = try await env.accessTokenVerifier()
                env.clock.advance(by: .seconds(24 * 3600 - 60))
                _ = try verifier.verify(registered.tokens.accessToken, now: env.clock.now())
                env.clock.advance(by: .seconds(120))
                #expect(throws: TokenError.expired) {
                    try verifier.verify(registered.tokens.accessToken, now: env.clock.now())
                }

                // Refreshing within 30 days keeps the session going for another 30 days from then.
                let refreshed = try await env.refresh(registered.tokens.refreshToken)
                env.clock.advance(by: .seconds(29 * 24 * 3600))
                #expect(try await env.sessionState(refreshed, userID: registered.user.id) == .active)
                env.clock.advance(by: .seconds(24 * 3600 + 60))
                #expect(try await env.sessionState(refreshed, userID: registered.user.id) == .expired)
                let expired = await env.error { try await env.refresh(refreshed.refreshToken) }
                #expect(expired?.errorReason == "REFRESH_TOKEN_INVALID")
            }
        }

        @Test("tampered, re-signed, alg none and foreign-audience access tokens are refused by the published keys")
        func tampering() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let verifier = try await env.accessTokenVerifier()
                let token = registered.tokens.accessToken
                let parts = token.split(separator: ".").map(String.init)
                try #require(parts.count == 3)

                // Another subject in the payload, same signature.
                let payload = try #require(Base64URL.decode(parts[1]))
                var claims = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
                claims["sub"] = UUID().uuidString.lowercased()
                let forgedPayload = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
                #expect(throws: TokenError.invalidSignature) {
                    try verifier.verify(
                        [parts[0], forgedPayload, parts[2]].joined(separator: "."), now: env.clock.now())
                }
                // One flipped bit of the signature.
                var signature = try #require(Base64URL.decode(parts[2]))
                signature[0] ^= 1
                #expect(throws: TokenError.invalidSignature) {
                    try verifier.verify(
                        [parts[0], parts[1], Base64URL.encode(signature)].joined(separator: "."), now: env.clock.now())
                }
                // alg none with the signature dropped.
                let none = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8))
                #expect(throws: TokenError.self) {
                    try verifier.verify([none, parts[1], ""].joined(separator: "."), now: env.clock.now())
                }
                // Signed by a key that is not ours, under our key id.
                let keyID = try keyID(of: token)
                let stranger = AccessTokenIssuer(
                    signingKey: SigningKey(keyID: keyID, privateKey: try Ed25519.PrivateKey()),
                    issuer: "habitflow-auth",
                    audience: "habitflow")
                let strangers = try stranger.issue(
                    subject: registered.user.id, sessionID: registered.tokens.sessionID, now: env.clock.now())
                #expect(throws: TokenError.invalidSignature) {
                    try verifier.verify(strangers.token, now: env.clock.now())
                }
                // Our token, shown to a verifier for another audience.
                let otherAudience = AccessTokenVerifier(
                    issuer: "habitflow-auth", audience: "someone-else", keys: verifier.keys)
                #expect(throws: TokenError.wrongAudience) { try otherAudience.verify(token, now: env.clock.now()) }
                #expect(throws: TokenError.self) { try verifier.verify("garbage", now: env.clock.now()) }
            }
        }

        @Test("key rotation: the next key is published before it signs; the old one verifies until its tokens expire")
        func keyRotation() async throws {
            try await AuthTestEnvironment.run(configure: { settings in
                settings.keyRotationInterval = .seconds(3600)
                settings.keyPublicationLead = .seconds(60)
            }) { env in
                // Start well past any key earlier tests made: the key signing then is due for rotation, so its
                // successor is published and, a minute later, signs. From there the schedule is this test's own.
                env.clock.advance(by: .seconds(400 * 24 * 3600))
                _ = try await env.authInternal.getVerificationKeys(Habitflow_Auth_V1_GetVerificationKeysRequest())
                env.clock.advance(by: .seconds(61))
                let first = try await env.register()
                let firstKey = try keyID(of: first.tokens.accessToken)

                env.clock.advance(by: .seconds(3600))
                let published = try await env.authInternal.getVerificationKeys(
                    Habitflow_Auth_V1_GetVerificationKeysRequest())
                let pending = try #require(
                    published.keys.first { $0.keyID != firstKey && $0.activateTime.date > env.clock.now() })
                #expect(published.keys.contains { $0.keyID == firstKey })
                // Not signing yet: verifiers must learn it first.
                let beforeActivation = try await env.refresh(first.tokens.refreshToken)
                #expect(try keyID(of: beforeActivation.accessToken) == firstKey)

                env.clock.advance(by: .seconds(61))
                let afterActivation = try await env.refresh(beforeActivation.refreshToken)
                #expect(try keyID(of: afterActivation.accessToken) == pending.keyID)
                let verifier = try await env.accessTokenVerifier()
                _ = try verifier.verify(afterActivation.accessToken, now: env.clock.now())
                // The old key still verifies.
                _ = try verifier.verify(beforeActivation.accessToken, now: env.clock.now())
                let retired = try #require(
                    try await env.authInternal.getVerificationKeys(Habitflow_Auth_V1_GetVerificationKeysRequest()).keys
                        .first { $0.keyID == firstKey })
                #expect(retired.hasNotAfter)
                #expect(abs(retired.notAfter.date.timeIntervalSince(pending.activateTime.date) - 24 * 3600) < 1)

                // A day after the switch no token of the old key is valid: it is no longer published.
                env.clock.advance(by: .seconds(24 * 3600 + 60))
                let later = try await env.authInternal.getVerificationKeys(
                    Habitflow_Auth_V1_GetVerificationKeysRequest())
                #expect(!later.keys.contains { $0.keyID == firstKey })
                #expect(later.keys.contains { $0.keyID == pending.keyID })
                let set = try JSONWebKeySet(json: Data(later.jwksJson.utf8))
                #expect(set.key(id: pending.keyID) != nil)
            }
        }

        @Test("private signing keys are stored sealed with AES-256-GCM under the key-encryption key, bound to their id")
        func sealedSigningKeys() async throws {
            try await AuthTestEnvironment.run { env in
                _ = try await env.register()
                let rows = try await env.pool.query("SELECT key_id, public_key, sealed_private_key FROM signing_keys")
                #expect(!rows.isEmpty)
                for row in rows {
                    let keyID = try row.decode(0, as: String.self)
                    let publicKey = try row.decode(1, as: Data.self)
                    let sealed = try row.decode(2, as: Data.self)
                    #expect(sealed.count == 12 + 32 + 16)
                    let seed = try AES256GCM.open(sealed, key: testKeyEncryptionKey, additionalData: Array(keyID.utf8))
                    #expect(
                        try Ed25519.PrivateKey(rawRepresentation: seed).publicKey.rawRepresentation == Array(publicKey))
                    #expect(throws: CryptoError.self) {
                        try AES256GCM.open(sealed, key: testKeyEncryptionKey, additionalData: Array("other".utf8))
                    }
                    #expect(throws: CryptoError.self) {
                        try AES256GCM.open(
                            sealed, key: [UInt8](repeating: 8, count: 32), additionalData: Array(keyID.utf8))
                    }
                }
            }
        }
    }
}

/// The `kid` header of a compact JWS.
func keyID(of token: String) throws -> String {
    let header = try #require(token.split(separator: ".").first.flatMap { Base64URL.decode($0) })
    let object = try #require(try JSONSerialization.jsonObject(with: Data(header)) as? [String: Any])
    return try #require(object["kid"] as? String)
}
