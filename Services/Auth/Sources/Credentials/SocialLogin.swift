internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowTokens

/// Sign-in with Google or Apple: verifies OpenID Connect ID tokens against each configured provider's keys (a JWKS
/// file or URL, cached and refetched when a token names an unknown key). The account of a verified identity is the
/// store's (``AuthStore/signIn(identity:email:timeZone:now:)``).
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

    /// Verifies an ID token of `name`: signature, issuer, audience, expiry and, when the client sent one
    /// (non-empty), the nonce. `field` names the credential in errors.
    func verify(_ idToken: String, provider name: SocialProviderName, nonce: String, field: String) async throws
        -> VerifiedIdentity
    {
        guard let provider = providers[name] else { throw AuthError.providerNotConfigured(field: field) }
        let claims = try await verifiedClaims(idToken, provider: provider, name: name)
        if !nonce.isEmpty {
            guard let tokenNonce = claims.nonce, ConstantTime.equals(Array(tokenNonce.utf8), Array(nonce.utf8)) else {
                throw AuthError.idTokenInvalid("the ID token's nonce does not match")
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
                throw AuthError.providerKeysUnavailable("the provider's keys cannot be loaded right now (\(reason))")
            }
            throw AuthError.idTokenInvalid("the ID token was refused: \(error)")
        }
    }
}
