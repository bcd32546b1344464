public import Foundation

/// An OpenID Connect provider whose ID tokens we accept for social login: who issues them, for which of our client
/// ids, signed with which keys.
public struct OIDCProvider: Sendable {
    /// Our name for it, as callers pass it to ``IDTokenVerifier/verify(_:provider:now:)``: `"google"`, `"apple"`.
    public var name: String
    /// Accepted `iss` values.
    public var issuers: [String]
    /// Our OAuth client ids (web, iOS, Android...): the token's `aud` must contain one.
    public var audiences: [String]
    public var keys: JSONWebKeySet

    public init(name: String, issuers: [String], audiences: [String], keys: JSONWebKeySet) {
        self.name = name
        self.issuers = issuers
        self.audiences = audiences
        self.keys = keys
    }

    /// Google signs with both spellings of its issuer (OpenID Connect docs, "Validating an ID token").
    public static let googleIssuers = ["https://accounts.google.com", "accounts.google.com"]
    public static let appleIssuers = ["https://appleid.apple.com"]
    /// Where Google publishes its keys (`jwks_uri` of its discovery document).
    public static let googleKeySetURL = URL(string: "https://www.googleapis.com/oauth2/v3/certs")!  // a valid literal
    /// Where Apple publishes its keys for Sign in with Apple.
    public static let appleKeySetURL = URL(string: "https://appleid.apple.com/auth/keys")!  // a valid literal

    /// Google, for tokens issued to any of `clientIDs`.
    public static func google(clientIDs: [String], keys: JSONWebKeySet) -> OIDCProvider {
        OIDCProvider(name: "google", issuers: googleIssuers, audiences: clientIDs, keys: keys)
    }

    /// Apple, for tokens issued to any of `clientIDs` (app bundle ids and Services IDs).
    public static func apple(clientIDs: [String], keys: JSONWebKeySet) -> OIDCProvider {
        OIDCProvider(name: "apple", issuers: appleIssuers, audiences: clientIDs, keys: keys)
    }
}

/// What a verified ID token says about the person signing in.
public struct IDTokenClaims: Sendable, Hashable {
    /// The ``OIDCProvider/name`` the token was verified for.
    public var provider: String
    public var issuer: String
    /// `sub`: the person's stable id at the provider (the key to link accounts by, never the email).
    public var subject: String
    /// The one of our client ids that the token's `aud` contained.
    public var audience: String
    public var email: String?
    /// `email_verified`, a boolean or (Apple) the string `"true"`; `false` when absent.
    public var emailVerified: Bool
    public var expiresAt: Date
    public var issuedAt: Date
    /// `nonce`, for the caller to compare with the one its client sent (Apple sends a hash of it).
    public var nonce: String?

    public init(
        provider: String, issuer: String, subject: String, audience: String, email: String?, emailVerified: Bool,
        expiresAt: Date, issuedAt: Date, nonce: String?
    ) {
        self.provider = provider
        self.issuer = issuer
        self.subject = subject
        self.audience = audience
        self.email = email
        self.emailVerified = emailVerified
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.nonce = nonce
    }
}

/// Verifies OIDC ID tokens (Google, Apple) against each provider's configured keys.
///
/// The algorithm is the one the key named by `kid` allows (`RS256` for an RSA key, `ES256` for P-256, `EdDSA` for
/// Ed25519) and nothing else: no `none`, no `HS256`. Then `iss` must be one of the provider's issuers, `aud`
/// contain one of its client ids, `sub`, `exp` and `iat` be present, and the times hold within `leeway`.
public struct IDTokenVerifier: Sendable {
    public let providers: [String: OIDCProvider]
    public let leeway: Duration

    /// - Parameter providers: Should two share a name, the first wins.
    /// - Precondition: `leeway` is not negative.
    public init(providers: [OIDCProvider], leeway: Duration = .seconds(60)) {
        precondition(leeway >= .zero, "the leeway must not be negative")
        self.providers = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.leeway = leeway
    }

    public func verify(_ idToken: String, provider name: String, now: Date) throws(TokenError) -> IDTokenClaims {
        guard let provider = providers[name] else { throw .unknownProvider(name) }
        return try Self.verify(CompactJWS(parsing: idToken), provider: provider, now: now, leeway: leeway)
    }

    static func verify(_ jws: CompactJWS, provider: OIDCProvider, now: Date, leeway: Duration) throws(TokenError)
        -> IDTokenClaims
    {
        guard JWSAlgorithm(rawValue: jws.algorithmName) != nil else { throw .unsupportedAlgorithm(jws.algorithmName) }
        let keyID = try jws.requireKeyID()
        guard let key = provider.keys.key(id: keyID), key.use != "enc" else { throw .unknownKey(keyID) }
        try key.verify(jws)

        let claims = try JSON.decode(JWTClaims.self, from: jws.payload, what: "claims")
        guard let issuer = claims.iss else { throw .missingClaim("iss") }
        guard provider.issuers.contains(issuer) else { throw .wrongIssuer }
        guard let audiences = claims.aud?.values else { throw .missingClaim("aud") }
        guard let audience = audiences.first(where: provider.audiences.contains) else { throw .wrongAudience }
        let subject = try claims.require(claims.sub, "sub")
        let times = try claims.checkTimes(now: now, leeway: leeway.timeInterval)
        return IDTokenClaims(
            provider: provider.name, issuer: issuer, subject: subject, audience: audience, email: claims.email,
            emailVerified: claims.emailVerified?.value ?? false, expiresAt: times.expiresAt,
            issuedAt: times.issuedAt, nonce: claims.nonce)
    }
}
