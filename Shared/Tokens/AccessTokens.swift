internal import HabitFlowBase64
public import Foundation
public import HabitFlowCrypto

/// What an access token says: who it is for, which session, and when it stops being valid.
public struct AccessTokenClaims: Sendable, Hashable {
    /// `iss`: the auth service that issued the token.
    public var issuer: String
    /// `aud`: the audience the token is for (the gateway); when the token names several, the one that was checked.
    public var audience: String
    /// `sub`: the user's id.
    public var subject: String
    /// `sid`: the session the token belongs to, so that revoking the session can be told apart per device.
    public var sessionID: String
    /// `iat`, whole seconds.
    public var issuedAt: Date
    /// `exp`, whole seconds.
    public var expiresAt: Date
    /// The header's `kid`: the signing key.
    public var keyID: String
    /// `jti`: unique per token.
    public var tokenID: String

    public init(
        issuer: String, audience: String, subject: String, sessionID: String, issuedAt: Date, expiresAt: Date,
        keyID: String, tokenID: String
    ) {
        self.issuer = issuer
        self.audience = audience
        self.subject = subject
        self.sessionID = sessionID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.keyID = keyID
        self.tokenID = tokenID
    }
}

/// An Ed25519 key that signs access tokens, with the `kid` that tokens carry.
public struct SigningKey: Sendable {
    public var keyID: String
    /// A secret: never log it.
    public var privateKey: Ed25519.PrivateKey

    public init(keyID: String, privateKey: Ed25519.PrivateKey) {
        self.keyID = keyID
        self.privateKey = privateKey
    }

    /// A new random key with a random `kid` (16 random bytes, base64url).
    public static func generate() throws(CryptoError) -> SigningKey {
        SigningKey(keyID: Base64URL.encode(SecureRandom.bytes(16)), privateKey: try Ed25519.PrivateKey())
    }

    /// The public half, for verifiers; `notAfter` is when it stops verifying.
    public func verificationKey(notAfter: Date? = nil) -> VerificationKey {
        VerificationKey(keyID: keyID, publicKey: privateKey.publicKey, notAfter: notAfter)
    }
}

/// A public key that verifies access tokens whose header names `keyID`.
///
/// Key rotation: keep a retired key here, with `notAfter` at least one token lifetime after it signed its last
/// token, so that tokens it signed verify until they expire; after `notAfter` it verifies nothing.
public struct VerificationKey: Sendable, Hashable {
    public var keyID: String
    public var publicKey: Ed25519.PublicKey
    /// When set, tokens are refused with ``TokenError/unknownKey(_:)`` once `now` is past it.
    public var notAfter: Date?

    public init(keyID: String, publicKey: Ed25519.PublicKey, notAfter: Date? = nil) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.notAfter = notAfter
    }

    /// As a JWK (`OKP`, `Ed25519`, `alg` `EdDSA`, `use` `sig`), for publishing in a JWK Set.
    public var jsonWebKey: JSONWebKey {
        JSONWebKey(keyID: keyID, publicKey: .ed25519(publicKey), use: "sig", algorithm: JWSAlgorithm.edDSA.rawValue)
    }

    /// The Ed25519 key named `keyID` in a JWK Set, or `nil` (absent, or not an Ed25519 signing key).
    public init?(_ key: JSONWebKey, notAfter: Date? = nil) {
        guard case .ed25519(let publicKey) = key.publicKey, let keyID = key.keyID, key.use != "enc" else { return nil }
        self.init(keyID: keyID, publicKey: publicKey, notAfter: notAfter)
    }
}

/// Signs access tokens: compact JWS, `alg` `EdDSA`, `typ` `JWT`, `kid` of the signing key.
public struct AccessTokenIssuer: Sendable {
    public let signingKey: SigningKey
    public let issuer: String
    public let audience: String
    /// How long a token is valid. Default 24 hours (DESIGN §3).
    public let lifetime: Duration

    /// - Precondition: `lifetime` is at least one second.
    public init(signingKey: SigningKey, issuer: String, audience: String, lifetime: Duration = .seconds(24 * 3600)) {
        precondition(lifetime >= .seconds(1), "an access token lifetime must be at least one second")
        self.signingKey = signingKey
        self.issuer = issuer
        self.audience = audience
        self.lifetime = lifetime
    }

    /// A new token for `subject` (the user id) in session `sessionID`, valid from `now` (rounded down to a whole
    /// second, as JWT dates are) for ``lifetime``.
    public func issue(subject: String, sessionID: String, now: Date) throws(CryptoError) -> (
        token: String, claims: AccessTokenClaims
    ) {
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = AccessTokenClaims(
            issuer: issuer,
            audience: audience,
            subject: subject,
            sessionID: sessionID,
            issuedAt: issuedAt,
            expiresAt: issuedAt.addingTimeInterval(Double(lifetime.components.seconds)),
            keyID: signingKey.keyID,
            tokenID: Base64URL.encode(SecureRandom.bytes(16)))
        let payload = JWTClaims(
            iss: claims.issuer, sub: claims.subject, aud: .one(claims.audience), exp: NumericDate(claims.expiresAt),
            iat: NumericDate(claims.issuedAt), jti: claims.tokenID, sid: claims.sessionID)
        let header = JOSEHeader(alg: JWSAlgorithm.edDSA.rawValue, kid: signingKey.keyID, typ: "JWT")
        let token = try CompactJWS.serialize(header: header, payload: JSON.encode(payload)) {
            (input: [UInt8]) throws(CryptoError) -> [UInt8] in try signingKey.privateKey.signature(for: input)
        }
        return (token, claims)
    }
}

/// Verifies access tokens locally (the gateway, and auth itself) against a set of Ed25519 keys.
///
/// Refuses, with the matching ``TokenError``: anything but `alg` `EdDSA` (so `none`, `HS256` with a public key as
/// the secret, `RS256`...), a `typ` other than `JWT`, a missing or unknown `kid`, a key past its `notAfter`, a bad
/// signature, a wrong `iss` or `aud`, `exp` passed or `iat`/`nbf` in the future (each beyond `leeway`), and a missing
/// `sub`, `sid`, `jti`, `exp` or `iat`.
public struct AccessTokenVerifier: Sendable {
    public let issuer: String
    public let audience: String
    public let leeway: Duration
    private let keysByID: [String: VerificationKey]

    /// - Parameter keys: Should two share a `kid`, the first wins.
    /// - Precondition: `leeway` is not negative.
    public init(issuer: String, audience: String, keys: [VerificationKey], leeway: Duration = .seconds(30)) {
        precondition(leeway >= .zero, "the leeway must not be negative")
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.keysByID = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// A verifier for the Ed25519 signing keys of a JWK Set, as auth publishes them; other keys are ignored.
    ///
    /// A JWK carries no `notAfter`: a key verifies for as long as the set that lists it is in use.
    public init(issuer: String, audience: String, keySet: JSONWebKeySet, leeway: Duration = .seconds(30)) {
        self.init(
            issuer: issuer, audience: audience, keys: keySet.keys.compactMap { VerificationKey($0) }, leeway: leeway)
    }

    /// The keys this verifier accepts.
    public var keys: [VerificationKey] { Array(keysByID.values) }

    public func verify(_ token: String, now: Date) throws(TokenError) -> AccessTokenClaims {
        let jws = try CompactJWS(parsing: token)
        guard jws.algorithmName == JWSAlgorithm.edDSA.rawValue else { throw .unsupportedAlgorithm(jws.algorithmName) }
        if let type = jws.header.typ, type.uppercased() != "JWT" { throw .malformed("typ is \"\(type)\", not JWT") }
        let keyID = try jws.requireKeyID()
        guard let key = keysByID[keyID], key.notAfter.map({ now <= $0 }) ?? true else { throw .unknownKey(keyID) }
        try key.jsonWebKey.verify(jws)

        let claims = try JSON.decode(JWTClaims.self, from: jws.payload, what: "claims")
        guard let tokenIssuer = claims.iss else { throw .missingClaim("iss") }
        guard tokenIssuer == issuer else { throw .wrongIssuer }
        guard let audiences = claims.aud?.values else { throw .missingClaim("aud") }
        guard audiences.contains(audience) else { throw .wrongAudience }
        let subject = try claims.require(claims.sub, "sub")
        let sessionID = try claims.require(claims.sid, "sid")
        let tokenID = try claims.require(claims.jti, "jti")
        let times = try claims.checkTimes(now: now, leeway: leeway.timeInterval)
        return AccessTokenClaims(
            issuer: tokenIssuer, audience: audience, subject: subject, sessionID: sessionID,
            issuedAt: times.issuedAt, expiresAt: times.expiresAt, keyID: keyID, tokenID: tokenID)
    }
}
