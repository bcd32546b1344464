internal import HabitFlowInternalCredential
internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import Logging
internal import HabitFlowCrypto

/// What both auth handlers share: the store, settings, password hashing, keys, mail and social providers, and the
/// steps several RPCs have in common (who calls, opening a session, checking a password).
struct AuthCore: Sendable {
    let store: AuthStore
    let settings: AuthSettings
    let hasher: PasswordHasher
    let keyRing: SigningKeyRing
    let mail: MailDispatcher
    let social: SocialLogin
    let logger: Logger

    var clock: any AuthClock { settings.clock }

    // MARK: - Caller

    /// The signed-in caller: user and session (the gateway sets both for a user's call).
    func requireSignedIn() throws -> (userID: UUID, sessionID: UUID) {
        let userID = try CallerIdentity.requireUser()
        guard let session = CallerIdentity.current?.sessionID, let sessionID = UUID(canonical: session) else {
            throw AuthError.sessionRequired
        }
        return (userID, sessionID)
    }

    /// The end client's address: as the gateway reported it, else the peer's host.
    func clientAddress(_ context: ServerContext) -> String {
        if let address = CallerIdentity.current?.clientAddress, !address.isEmpty { return address }
        return Self.host(ofPeer: context.peer)
    }

    /// `ipv4:127.0.0.1:5000` → `127.0.0.1`, `ipv6:[::1]:5000` → `::1`.
    static func host(ofPeer peer: String) -> String {
        var text = Substring(peer)
        if let colon = text.firstIndex(of: ":"), text[..<colon] == "ipv4" || text[..<colon] == "ipv6" {
            text = text[text.index(after: colon)...]
        }
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            return String(text[text.index(after: text.startIndex)..<close])
        }
        if let colon = text.lastIndex(of: ":") { return String(text[..<colon]) }
        return String(text)
    }

    // MARK: - Sessions and tokens

    /// Opens a session for `userID` and returns its tokens. The key is fetched first, so a key problem fails the
    /// call before anything commits.
    func openSession(userID: UUID, device: DeviceDetails, clientAddress: String) async throws
        -> Habitflow_Auth_V1_AuthTokens
    {
        let key = try await keyRing.signingKey()
        let now = clock.now()
        let opened = try await store.openSession(
            userID: userID, device: device, clientAddress: clientAddress, lifetime: settings.refreshTokenLifetime,
            now: now)
        return try tokens(for: opened, key: key, now: now)
    }

    /// The tokens of a session just opened.
    func tokens(for opened: OpenedSession, key: StoredSigningKey, now: Date) throws -> Habitflow_Auth_V1_AuthTokens {
        Habitflow_Auth_V1_AuthTokens(
            try settings.issueTokens(
                for: opened.session, refreshToken: opened.refreshToken, refreshExpiresAt: opened.session.expiresAt,
                key: key, now: now))
    }

    // MARK: - Passwords

    /// Checks `password` against the account's hash, counting a failure against the account (throttled like a
    /// login: someone holding a stolen access token must not get unlimited guesses). Throws
    /// ``AuthError/wrongPassword(field:)`` when wrong, ``AuthError/tooManyAttempts(retryAfter:)`` when too many were
    /// wrong.
    func requirePassword(_ password: String, of user: UserRecord, field: String) async throws {
        guard !password.isEmpty else { throw AuthError.passwordMissing(field: field) }
        let accountKey = ThrottleKey(.loginAccount, user.id.lowercasedString)
        try await store.checkThrottle([accountKey], now: clock.now())
        guard try await hasher.verify(password, against: user.passwordHash) else {
            try await store.recordAttempt(accountKey, policy: settings.loginAccountThrottle, now: clock.now())
            throw AuthError.wrongPassword(field: field)
        }
    }
}
