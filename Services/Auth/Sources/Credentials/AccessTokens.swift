internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowTokens

/// What a sign-in or refresh hands the client: a new access token and the session's refresh token.
struct IssuedTokens: Sendable {
    var accessToken: String
    var accessTokenExpiresAt: Date
    var refreshToken: OpaqueToken
    var refreshTokenExpiresAt: Date
    var sessionID: UUID
}

extension AuthSettings {
    /// The tokens of `session`: an access token signed with `key` at `now` (``accessTokenLifetime``), and
    /// `refreshToken`.
    func issueTokens(
        for session: SessionRecord, refreshToken: OpaqueToken, refreshExpiresAt: Date, key: StoredSigningKey, now: Date
    ) throws -> IssuedTokens {
        let issuer = AccessTokenIssuer(
            signingKey: SigningKey(keyID: key.keyID, privateKey: key.privateKey), issuer: issuer,
            audience: audience, lifetime: accessTokenLifetime)
        let (accessToken, claims) = try issuer.issue(
            subject: session.userID.lowercasedString, sessionID: session.id.lowercasedString, now: now)
        return IssuedTokens(
            accessToken: accessToken, accessTokenExpiresAt: claims.expiresAt, refreshToken: refreshToken,
            refreshTokenExpiresAt: refreshExpiresAt, sessionID: session.id)
    }

    /// When signing keys rotate, from these settings.
    var keyRotation: KeyRotationPolicy {
        KeyRotationPolicy(
            rotationInterval: keyRotationInterval, publicationLead: keyPublicationLead,
            accessTokenLifetime: accessTokenLifetime)
    }
}
