internal import HabitFlowBase64
internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowTokens

/// An account as stored.
struct UserRecord: Sendable {
    var id: UUID
    var email: String
    var emailVerified: Bool
    var username: String
    var displayName: String
    var timeZone: String
    /// nil for accounts created by social login that never set a password.
    var passwordHash: String?
    var createdAt: Date
    var updatedAt: Date
    /// Provider names ("google", "apple") of linked social identities; filled by reads of `user_accounts`.
    var linkedProviders: [String] = []

    init(
        id: UUID, email: String, emailVerified: Bool, username: String, displayName: String, timeZone: String,
        passwordHash: String?, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.email = email
        self.emailVerified = emailVerified
        self.username = username
        self.displayName = displayName
        self.timeZone = timeZone
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// The profile fields an UpdateProfile changes; nil: left as it is.
struct ProfileChange: Sendable {
    var username: String?
    var displayName: String?
    var timeZone: String?

    /// `user` with the change applied. An empty display name falls back to the username, as at registration.
    func applied(to user: UserRecord) -> UserRecord {
        var next = user
        if let username { next.username = username }
        if let displayName { next.displayName = displayName.isEmpty ? next.username : displayName }
        if let timeZone { next.timeZone = timeZone }
        return next
    }
}

/// A signed-in device.
struct SessionRecord: Sendable {
    var id: UUID
    var userID: UUID
    var deviceID: UUID?
    var deviceName: String
    var clientAddress: String
    var createdAt: Date
    var lastUsedAt: Date
    var expiresAt: Date
    var revokedAt: Date?
    /// Set with `revokedAt`.
    var revokeReason: RevokeReason?

    /// Where the session stands at `now`: ended by a revocation, or by not being refreshed in time, or usable.
    func status(at now: Date) -> SessionStatus {
        if revokedAt != nil { return .revoked }
        return expiresAt <= now ? .expired : .active
    }
}

/// Where a session stands (`AuthInternal/CheckSession`, the export).
enum SessionStatus: Sendable {
    case active
    case revoked
    case expired
}

/// A session just opened, with its first refresh token (valid until the session expires).
struct OpenedSession: Sendable {
    var session: SessionRecord
    var refreshToken: OpaqueToken
}

/// The device a session is opened from, validated.
struct DeviceDetails: Sendable {
    var id: UUID?
    var name: String
}

/// Why a session ended (the `revoke_reason` column).
enum RevokeReason: String, Sendable {
    case logout
    case logoutEverywhere = "logout_everywhere"
    case revoked
    case replaced
    case refreshTokenReuse = "refresh_token_reuse"
    case passwordChanged = "password_changed"
    case passwordReset = "password_reset"
    case socialLink = "social_link"
}

/// What presenting a refresh token led to.
enum RefreshOutcome: Sendable {
    /// A new refresh token for the session; the presented one is used up.
    case rotated(SessionRecord, refreshToken: OpaqueToken, refreshExpiresAt: Date)
    /// The token had been used before: the session is now revoked.
    case reused
    /// Unknown, expired, or its session has ended.
    case invalid
}

/// What a one-time token is for.
enum OneTimeTokenPurpose: String, Sendable {
    case passwordReset = "password_reset"
    case emailChange = "email_change"
}

/// The providers' names as stored (`social_identities.provider`) and as the token verifier knows them.
enum SocialProviderName: String, Sendable, CaseIterable {
    case google
    case apple
}

/// A social identity linked to an account (a row of `social_identities`).
struct LinkedIdentityRecord: Sendable {
    var provider: SocialProviderName
    /// The provider's stable id of the person (`sub`).
    var subject: String
    /// The email the provider vouched for when the identity was linked, if any.
    var email: String?
    var linkedAt: Date
}

/// An identity a provider vouched for in a valid ID token.
struct VerifiedIdentity: Sendable {
    var provider: SocialProviderName
    /// The provider's stable id of the person (`sub`).
    var subject: String
    var email: String?
    var emailVerified: Bool
}

/// A mail waiting in `mail_outbox`.
struct OutgoingMail: Sendable {
    var id: UUID
    var recipient: String
    var subject: String
    var body: String
    var attempts: Int
}

/// A secret handed to a client once and stored only as its SHA-256: refresh, reset and email-change tokens.
struct OpaqueToken: Sendable {
    /// 256 random bits, base64url without padding (43 characters).
    let value: String
    let hash: Data

    init() {
        let bytes = SecureRandom.bytes(32)
        self.value = Base64URL.encode(bytes)
        self.hash = Data(SHA256.hash(bytes))
    }

    /// The hash of a token a client presents, or nil when it cannot be one of ours (wrong shape). Comparing hashes
    /// through the primary key index leaks nothing about the token itself.
    static func hash(of presented: String) -> Data? {
        guard presented.utf8.count == 43, let bytes = Base64URL.decode(presented), bytes.count == 32 else {
            return nil
        }
        return Data(SHA256.hash(bytes))
    }
}

extension Duration {
    /// In seconds, as Foundation counts time.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
