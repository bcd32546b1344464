internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowRPC

/// The status clients see for each ``AuthError``: code, message and rich details, worded once. The host's error
/// mapping answers with it whatever handler threw it.
extension AuthError: RPCErrorConvertible {
    var rpcError: RPCError {
        switch self {
        case .emailInUse:
            .alreadyExists(resourceType: "user", name: "email", "an account with this email already exists")
        case .usernameInUse:
            .alreadyExists(resourceType: "user", name: "username", "the username is taken")
        case .userNotFound(let id):
            .notFound(resourceType: "user", name: id.lowercasedString)
        case .sessionNotFound(let id):
            .notFound(resourceType: "session", name: id.lowercasedString)
        case .sessionRequired:
            .unauthenticated(reason: "SESSION_REQUIRED", "this call needs a signed-in session")
        case .invalidCredentials:
            .unauthenticated(reason: "INVALID_CREDENTIALS", "wrong email, username or password")
        case .refreshTokenReused:
            .unauthenticated(
                reason: "REFRESH_TOKEN_REUSED", "this refresh token was already used; the session has been signed out")
        case .refreshTokenInvalid:
            .unauthenticated(reason: "REFRESH_TOKEN_INVALID", "the refresh token is invalid or expired")
        case .passwordMissing(let field):
            .invalidArgument(field: field, "is required")
        case .wrongPassword(let field):
            .invalidArgument(field: field, "is not the account's password")
        case .noPassword:
            .failedPrecondition(
                type: "NO_PASSWORD", subject: "user", "the account has no password yet; set one with a password reset")
        case .tooManyAttempts(let delay):
            .resourceExhausted("too many attempts; try again later", retryAfter: delay)
        case .invalidToken:
            .invalidArgument(field: "token", "is invalid, expired or already used")
        case .emailUnchanged:
            .invalidArgument(field: "new_email", "is already the account's email")
        case .socialCredentialRequired:
            .invalidArgument(field: "social_credential", "is required for an account without a password")
        case .identityNotLinked:
            .permissionDenied(
                reason: "IDENTITY_NOT_LINKED", "the ID token is not of an identity linked to this account")
        case .providerNotConfigured(let field):
            .failedPrecondition(
                type: "PROVIDER_NOT_CONFIGURED", subject: "\(field).provider",
                "sign-in with this provider is not configured on this server")
        case .idTokenInvalid(let message):
            .unauthenticated(reason: "ID_TOKEN_INVALID", message)
        case .providerKeysUnavailable(let message):
            RPCError(.unavailable, message)
        case .emailNotVerified:
            .failedPrecondition(
                type: "EMAIL_NOT_VERIFIED", subject: "credential",
                "the provider did not vouch for an email address; sign in with email and password instead")
        case .noFreeUsername:
            RPCError(.aborted, "could not choose a free username; try again")
        }
    }
}
