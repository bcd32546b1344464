internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import HabitFlowTokens
internal import Logging
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// A state the code relies on did not hold (a statement returned no row where one must exist). The host answers
/// `INTERNAL` with a correlation id and logs this.
struct AuthInvariantFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// What every auth handler shares: the database, settings, password hashing, keys, throttling, mail and social
/// providers, and the steps several RPCs have in common (opening a session, issuing tokens, checking a password).
struct AuthCore: Sendable {
    let pool: PostgresPool
    let settings: AuthSettings
    let hasher: PasswordHasher
    let keyRing: SigningKeyRing
    let throttle: Throttle
    let mail: MailDispatcher
    let social: SocialLogin
    let logger: Logger

    var clock: any AuthClock { settings.clock }

    // MARK: - Caller

    /// The signed-in caller: user and session (the gateway sets both for a user's call).
    func requireSignedIn() throws -> (userID: UUID, sessionID: UUID) {
        let userID = try CallerIdentity.requireUser()
        guard let session = CallerIdentity.current?.sessionID, let sessionID = UUID(canonical: session) else {
            throw RPCError.unauthenticated(reason: "SESSION_REQUIRED", "this call needs a signed-in session")
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

    /// Opens a session for `userID` inside `transaction` and returns its tokens. `key` is fetched before the
    /// transaction so a key problem fails the call before anything commits.
    func openSession(
        userID: UUID, device: DeviceDetails, clientAddress: String, key: StoredSigningKey, now: Date,
        on transaction: PostgresTransaction
    ) async throws -> Habitflow_Auth_V1_AuthTokens {
        let (session, refreshToken) = try await SessionStore.open(
            userID: userID, device: device, clientAddress: clientAddress, now: now,
            lifetime: settings.refreshTokenLifetime, on: transaction)
        return try tokens(
            for: session, refreshToken: refreshToken, refreshExpiresAt: session.expiresAt, key: key, now: now)
    }

    /// Opens a session in its own transaction, retrying once when a concurrent sign-in on the same device took the
    /// device's slot first (the one-live-session-per-device index).
    func openSession(userID: UUID, device: DeviceDetails, clientAddress: String) async throws
        -> Habitflow_Auth_V1_AuthTokens
    {
        let key = try await keyRing.signingKey()
        var attempt = 0
        while true {
            attempt += 1
            do {
                let now = clock.now()
                return try await pool.transaction { transaction in
                    try await openSession(
                        userID: userID, device: device, clientAddress: clientAddress, key: key, now: now,
                        on: transaction)
                }
            } catch let error as PostgresError
                where error.kind == .uniqueViolation && error.constraint == "sessions_one_live_per_device_key"
                && attempt < 3
            {
                continue
            }
        }
    }

    func tokens(
        for session: SessionRecord, refreshToken: OpaqueToken, refreshExpiresAt: Date, key: StoredSigningKey, now: Date
    ) throws -> Habitflow_Auth_V1_AuthTokens {
        let issuer = AccessTokenIssuer(
            signingKey: SigningKey(keyID: key.keyID, privateKey: key.privateKey), issuer: settings.issuer,
            audience: settings.audience, lifetime: settings.accessTokenLifetime)
        let (accessToken, claims) = try issuer.issue(
            subject: session.userID.lowercasedString, sessionID: session.id.lowercasedString, now: now)
        var tokens = Habitflow_Auth_V1_AuthTokens()
        tokens.accessToken = accessToken
        tokens.accessTokenExpireTime = Google_Protobuf_Timestamp(date: claims.expiresAt)
        tokens.refreshToken = refreshToken.value
        tokens.refreshTokenExpireTime = Google_Protobuf_Timestamp(date: refreshExpiresAt)
        tokens.sessionID = session.id.lowercasedString
        tokens.tokenType = "Bearer"
        return tokens
    }

    // MARK: - Passwords

    /// Checks `password` against the account's hash, counting a failure against the account (throttled like a
    /// login: someone holding a stolen access token must not get unlimited guesses). Throws `INVALID_ARGUMENT` on
    /// `field` when wrong, `RESOURCE_EXHAUSTED` when too many were wrong.
    func requirePassword(_ password: String, of user: UserRecord, field: String) async throws {
        guard !password.isEmpty else { throw RPCError.invalidArgument(field: field, "is required") }
        let accountKey = ThrottleKey(.loginAccount, user.id.lowercasedString)
        try await throttle.check([accountKey])
        guard try await hasher.verify(password, against: user.passwordHash) else {
            try await throttle.record(accountKey, policy: settings.loginAccountThrottle)
            throw RPCError.invalidArgument(field: field, "is not the account's password")
        }
    }

    /// The caller's account; `NOT_FOUND` when it was deleted while the access token still lives.
    func requireUser(_ userID: UUID, on database: some PostgresQueryable) async throws -> UserRecord {
        guard let user = try await UserStore.user(id: userID, on: database) else {
            throw RPCError.notFound(resourceType: "user", name: userID.lowercasedString)
        }
        return user
    }

    // MARK: - Events

    func appendUserEvent(_ message: some SwiftProtobuf.Message, userID: UUID, on transaction: PostgresTransaction)
        async throws
    {
        try await transaction.appendToOutbox(
            OutboxEvent(aggregateType: "user", aggregateID: userID.lowercasedString, message: message))
    }

    func userCreatedEvent(_ user: UserRecord) -> Habitflow_Events_V1_UserCreated {
        var event = Habitflow_Events_V1_UserCreated()
        event.userID = user.id.lowercasedString
        event.username = user.username
        event.timeZone = user.timeZone
        event.createdAt = Google_Protobuf_Timestamp(date: user.createdAt)
        return event
    }

    // MARK: - Mail

    /// Queues a mail with a link made of ``AuthSettings/linkBaseURL``, `path` and the token.
    func enqueueTokenMail(
        to recipient: String, subject: String, intro: String, path: String, token: OpaqueToken, validity: String,
        userID: UUID, now: Date, on transaction: PostgresTransaction
    ) async throws {
        let body = """
            \(intro)

            Open this link on your device:
            \(settings.linkBaseURL)\(path)?token=\(token.value)

            or enter this code in the app:
            \(token.value)

            It works once and expires in \(validity). If you did not ask for this, ignore this mail.
            """
        try await MailOutboxStore.enqueue(
            to: recipient, subject: subject, body: body, userID: userID, now: now, on: transaction)
    }
}

extension Habitflow_Auth_V1_User {
    init(_ record: UserRecord) {
        self.init()
        id = record.id.lowercasedString
        email = record.email
        emailVerified = record.emailVerified
        username = record.username
        displayName = record.displayName
        timeZone = record.timeZone
        passwordSet = record.passwordHash != nil
        linkedProviders = record.linkedProviders.compactMap(SocialProviderName.init(rawValue:)).map(\.proto)
        createTime = Google_Protobuf_Timestamp(date: record.createdAt)
        updateTime = Google_Protobuf_Timestamp(date: record.updatedAt)
    }
}

extension Habitflow_Auth_V1_Session {
    init(_ record: SessionRecord, current: Bool) {
        self.init()
        id = record.id.lowercasedString
        deviceID = record.deviceID?.lowercasedString ?? ""
        deviceName = record.deviceName
        clientAddress = record.clientAddress
        createTime = Google_Protobuf_Timestamp(date: record.createdAt)
        lastUseTime = Google_Protobuf_Timestamp(date: record.lastUsedAt)
        expireTime = Google_Protobuf_Timestamp(date: record.expiresAt)
        self.current = current
    }
}

/// The providers' names as stored (`social_identities.provider`) and as the token verifier knows them.
enum SocialProviderName: String, Sendable, CaseIterable {
    case google
    case apple

    init?(_ proto: Habitflow_Auth_V1_SocialProvider) {
        switch proto {
        case .google: self = .google
        case .apple: self = .apple
        default: return nil
        }
    }

    var proto: Habitflow_Auth_V1_SocialProvider {
        switch self {
        case .google: .google
        case .apple: .apple
        }
    }
}
