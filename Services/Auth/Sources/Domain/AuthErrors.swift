internal import Foundation

/// Why auth refuses a call, in the domain's words. `RPC/AuthError+RPC.swift` turns each into the status, message
/// and details clients see, in one place.
enum AuthError: Error, Hashable, Sendable {
    /// Another account has this email.
    case emailInUse
    /// Another account has this username.
    case usernameInUse
    /// The account does not exist (deleted while an access token still lives).
    case userNotFound(UUID)
    /// Not a session of the caller's.
    case sessionNotFound(UUID)
    /// The call needs a signed-in session, and the caller has none.
    case sessionRequired
    /// Wrong email, username or password at login (the same answer for an unknown account).
    case invalidCredentials
    case refreshTokenReused
    case refreshTokenInvalid
    /// A password the account must re-enter was not given; `field` names the input.
    case passwordMissing(field: String)
    /// A password the account must re-enter was wrong; `field` names the input.
    case wrongPassword(field: String)
    /// The account has no password to change (social sign-in only).
    case noPassword
    /// Too many attempts: the subject waits at least `retryAfter`.
    case tooManyAttempts(retryAfter: Duration)
    /// A reset or email-change token that is unknown, expired or used.
    case invalidToken
    /// The new email is the one the account has.
    case emailUnchanged
    /// An account without a password proves its owner with a social credential, and none came.
    case socialCredentialRequired
    /// The social credential is of an identity that is not linked to the account.
    case identityNotLinked
    /// Sign-in with this provider is off on this server; `field` names the credential.
    case providerNotConfigured(field: String)
    /// The ID token was refused (signature, issuer, audience, expiry, nonce): why.
    case idTokenInvalid(String)
    /// The provider's keys cannot be loaded right now: why.
    case providerKeysUnavailable(String)
    /// The provider did not vouch for an email, and the identity is not linked yet.
    case emailNotVerified
    /// Every generated username for a new social account was taken.
    case noFreeUsername
}

/// A state the code relies on did not hold (a statement returned no row where one must exist). The host answers
/// `INTERNAL` with a correlation id and logs this.
struct AuthInvariantFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
