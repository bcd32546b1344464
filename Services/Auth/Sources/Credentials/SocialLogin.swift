internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowCrypto
internal import HabitFlowPostgres
internal import HabitFlowRPC
internal import HabitFlowTokens

/// An identity a provider vouched for in a valid ID token.
struct VerifiedIdentity: Sendable {
    var provider: SocialProviderName
    /// The provider's stable id of the person (`sub`).
    var subject: String
    var email: String?
    var emailVerified: Bool
}

/// Sign-in with Google or Apple: verifies OpenID Connect ID tokens against each configured provider's keys (a JWKS
/// file or URL, cached and refetched when a token names an unknown key) and finds or creates the account.
final class SocialLogin: Sendable {
    private struct Provider: Sendable {
        var settings: SocialProviderSettings
        var keys: JWKSProvider
    }

    private let providers: [SocialProviderName: Provider]
    private let clock: any AuthClock

    init(settings: AuthSettings) {
        var providers: [SocialProviderName: Provider] = [:]
        for (name, configured) in [(SocialProviderName.google, settings.google), (.apple, settings.apple)] {
            guard let configured else { continue }
            let source: JWKSSource
            switch configured.keys {
            case .file(let path): source = .file(path)
            case .url(let url): source = .url(url)
            }
            providers[name] = Provider(settings: configured, keys: JWKSProvider(source: source))
        }
        self.providers = providers
        self.clock = settings.clock
    }

    /// Verifies a credential: signature, issuer, audience, expiry and, when the client sent one, the nonce.
    /// `field` names the credential in field violations.
    func verify(_ credential: Habitflow_Auth_V1_SocialCredential, field: String) async throws -> VerifiedIdentity {
        var rules = FieldRules()
        let name = SocialProviderName(credential.provider)
        if name == nil { rules.fail("\(field).provider", "must be GOOGLE or APPLE") }
        rules.required(credential.idToken, field: "\(field).id_token")
        try rules.throwIfInvalid()
        guard let name, let provider = providers[name] else {
            throw RPCError.failedPrecondition(
                type: "PROVIDER_NOT_CONFIGURED", subject: "\(field).provider",
                "sign-in with this provider is not configured on this server")
        }
        let claims = try await verifiedClaims(credential.idToken, provider: provider, name: name)
        if !credential.nonce.isEmpty {
            guard let nonce = claims.nonce, ConstantTime.equals(Array(nonce.utf8), Array(credential.nonce.utf8)) else {
                throw RPCError.unauthenticated(reason: "ID_TOKEN_INVALID", "the ID token's nonce does not match")
            }
        }
        return VerifiedIdentity(
            provider: name, subject: claims.subject, email: claims.email, emailVerified: claims.emailVerified)
    }

    private func verifiedClaims(_ idToken: String, provider: Provider, name: SocialProviderName) async throws
        -> IDTokenClaims
    {
        func verify(with keys: JSONWebKeySet) throws(TokenError) -> IDTokenClaims {
            let oidc = OIDCProvider(
                name: name.rawValue, issuers: provider.settings.issuers, audiences: provider.settings.clientIDs,
                keys: keys)
            return try IDTokenVerifier(providers: [oidc]).verify(idToken, provider: name.rawValue, now: clock.now())
        }
        do {
            do {
                return try verify(with: try await provider.keys.keys())
            } catch {
                // The provider may have rotated: refetch (rate-limited by the key cache) and try once more.
                guard case .unknownKey(let keyID) = error else { throw error }
                return try verify(with: try await provider.keys.keys(containing: keyID))
            }
        } catch let error as TokenError {
            if case .keySetUnavailable(let reason) = error {
                throw RPCError(.unavailable, "the provider's keys cannot be loaded right now (\(reason))")
            }
            throw RPCError.unauthenticated(reason: "ID_TOKEN_INVALID", "the ID token was refused: \(error)")
        }
    }

    /// The account of a verified identity: the one linked to it, else the one with its verified email (linked now),
    /// else a new one. Returns whether it was created.
    func signIn(_ identity: VerifiedIdentity, timeZone: String, core: AuthCore) async throws -> (UserRecord, Bool) {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await signInOnce(identity, timeZone: timeZone, core: core)
            } catch let error as PostgresError where error.kind == .uniqueViolation && attempt < 3 {
                continue  // a concurrent sign-in linked the identity or took the email first: look again
            } catch let error as RPCError where error == UserStore.emailInUse && attempt < 3 {
                continue
            }
        }
    }

    private func signInOnce(_ identity: VerifiedIdentity, timeZone: String, core: AuthCore) async throws
        -> (UserRecord, Bool)
    {
        let provider = identity.provider.rawValue
        if let userID = try await UserStore.userID(provider: provider, subject: identity.subject, on: core.pool) {
            return (try await core.requireUser(userID, on: core.pool), false)
        }
        var rules = FieldRules()
        let email = rules.email(identity.email ?? "", field: "credential.id_token.email")
        guard identity.emailVerified, rules.violations.isEmpty else {
            throw RPCError.failedPrecondition(
                type: "EMAIL_NOT_VERIFIED", subject: "credential",
                "the provider did not vouch for an email address; sign in with email and password instead")
        }
        let now = core.clock.now()
        return try await core.pool.transaction { transaction in
            if let existing = try await UserStore.user(email: email, on: transaction),
                let locked = try await UserStore.lockedUser(id: existing.id, on: transaction)
            {
                if !locked.emailVerified {
                    // Nobody proved they own this address until now. Whoever registered it may not be its owner
                    // (account pre-hijacking): their password and sessions stop working; the owner can set a
                    // password by reset.
                    try await UserStore.setPassword(
                        id: locked.id, hash: nil, verifiedEmail: true, updatedAt: now, on: transaction)
                    try await SessionStore.revokeAll(userID: locked.id, reason: .socialLink, now: now, on: transaction)
                }
                try await UserStore.linkIdentity(
                    provider: provider, subject: identity.subject, userID: locked.id, email: email, at: now,
                    on: transaction)
                return (try await core.requireUser(locked.id, on: transaction), false)
            }
            let user = try await createUser(email: email, timeZone: timeZone, now: now, on: transaction)
            try await UserStore.linkIdentity(
                provider: provider, subject: identity.subject, userID: user.id, email: email, at: now, on: transaction)
            try await core.appendUserEvent(core.userCreatedEvent(user), userID: user.id, on: transaction)
            return (try await core.requireUser(user.id, on: transaction), true)
        }
    }

    /// A new account without a password, its username made from the email's local part (with a random suffix
    /// when taken).
    private func createUser(email: String, timeZone: String, now: Date, on transaction: PostgresTransaction)
        async throws -> UserRecord
    {
        let base = Self.usernameBase(fromEmail: email)
        var candidates = [base]
        for _ in 0..<4 { candidates.append(base.prefix(24) + "_" + Self.randomDigits(4)) }
        candidates.append("user_" + Self.randomDigits(10))
        for candidate in candidates {
            let user = UserRecord(
                id: UUID.random(), email: email, emailVerified: true, username: candidate, displayName: candidate,
                timeZone: timeZone, passwordHash: nil, createdAt: now, updatedAt: now)
            do {
                try await transaction.savepoint { savepoint in try await UserStore.insert(user, on: savepoint) }
                return user
            } catch let error as RPCError where error == UserStore.usernameInUse {
                continue
            }
        }
        throw RPCError(.aborted, "could not choose a free username; try again")
    }

    /// The email's local part reduced to what usernames allow, 3 to 24 characters.
    static func usernameBase(fromEmail email: String) -> String {
        let local = email.prefix { $0 != "@" }.lowercased()
        var base = String(
            local.unicodeScalars.filter { scalar in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_"
                        || scalar == ".")
            }.prefix(24))
        if base.count < 3 { base = "user" }
        return base
    }

    private static func randomDigits(_ count: Int) -> String {
        String(SecureRandom.bytes(count).map { Character(String($0 % 10)) })
    }
}
