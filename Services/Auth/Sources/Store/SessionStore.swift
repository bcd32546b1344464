internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowPostgres
internal import HabitFlowTokens

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

    init(row: PostgresRow) throws {
        id = try row.decode("id")
        userID = try row.decode("user_id")
        deviceID = try row.decode("device_id")
        deviceName = try row.decode("device_name")
        clientAddress = try row.decode("client_address")
        createdAt = try row.decode("created_at")
        lastUsedAt = try row.decode("last_used_at")
        expiresAt = try row.decode("expires_at")
        revokedAt = try row.decode("revoked_at")
    }
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

/// What presenting a refresh token led to.
enum RefreshOutcome: Sendable {
    /// A new refresh token for the session; the presented one is used up.
    case rotated(SessionRecord, refreshToken: OpaqueToken, refreshExpiresAt: Date)
    /// The token had been used before: the session is now revoked.
    case reused
    /// Unknown, expired, or its session has ended.
    case invalid
}

/// Reads and writes of `sessions` and `refresh_tokens`.
enum SessionStore {
    /// Opens a session with its first refresh token. A session of the same device (same device id) ends: one per
    /// device.
    static func open(
        userID: UUID, device: DeviceDetails, clientAddress: String, now: Date, lifetime: Duration,
        on transaction: PostgresTransaction
    ) async throws -> (SessionRecord, OpaqueToken) {
        if let deviceID = device.id {
            try await transaction.execute(
                """
                UPDATE sessions SET revoked_at = \(now), revoke_reason = \(RevokeReason.replaced.rawValue) \
                WHERE user_id = \(userID) AND device_id = \(deviceID) AND revoked_at IS NULL
                """)
        }
        let expiresAt = now.addingTimeInterval(lifetime.timeInterval)
        let row = try await transaction.queryRow(
            """
            INSERT INTO sessions (id, user_id, device_id, device_name, client_address, created_at, last_used_at, \
            expires_at) VALUES (\(UUID.random()), \(userID), \(device.id as UUID?), \(device.name), \
            \(String(clientAddress.prefix(100))), \
            \(now), \(now), \(expiresAt)) RETURNING *
            """)
        guard let row else { throw AuthInvariantFailure("INSERT INTO sessions returned no row") }
        let session = try SessionRecord(row: row)
        let token = try await addRefreshToken(session: session, now: now, expiresAt: expiresAt, on: transaction)
        return (session, token)
    }

    private static func addRefreshToken(
        session: SessionRecord, now: Date, expiresAt: Date, on transaction: PostgresTransaction
    ) async throws -> OpaqueToken {
        let token = OpaqueToken()
        try await transaction.execute(
            """
            INSERT INTO refresh_tokens (token_hash, session_id, user_id, created_at, expires_at) \
            VALUES (\(token.hash), \(session.id), \(session.userID), \(now), \(expiresAt))
            """)
        return token
    }

    /// Uses up a refresh token and issues its successor, extending the session by `lifetime`. A token used before
    /// revokes its session (the caller commits that, then refuses).
    static func rotate(presented: String, now: Date, lifetime: Duration, on transaction: PostgresTransaction)
        async throws -> RefreshOutcome
    {
        guard let hash = OpaqueToken.hash(of: presented) else { return .invalid }
        // Lock the token row: of two concurrent uses of one token, the second sees it used.
        guard
            let token = try await transaction.queryRow(
                "SELECT session_id, expires_at, used_at FROM refresh_tokens WHERE token_hash = \(hash) FOR UPDATE")
        else { return .invalid }
        let sessionID = try token.decode("session_id", as: UUID.self)
        if try token.decode("used_at", as: Date?.self) != nil {
            try await revoke(sessionID: sessionID, reason: .refreshTokenReuse, now: now, on: transaction)
            return .reused
        }
        guard try token.decode("expires_at", as: Date.self) > now,
            try await transaction.queryRow(
                """
                SELECT 1 FROM sessions \
                WHERE id = \(sessionID) AND revoked_at IS NULL AND expires_at > \(now) FOR UPDATE
                """
            )
                != nil
        else { return .invalid }
        try await transaction.execute("UPDATE refresh_tokens SET used_at = \(now) WHERE token_hash = \(hash)")
        let expiresAt = now.addingTimeInterval(lifetime.timeInterval)
        guard
            let updated = try await transaction.queryRow(
                """
                UPDATE sessions SET last_used_at = \(now), expires_at = \(expiresAt) WHERE id = \(sessionID) RETURNING *
                """)
        else { return .invalid }
        let session = try SessionRecord(row: updated)
        let successor = try await addRefreshToken(session: session, now: now, expiresAt: expiresAt, on: transaction)
        return .rotated(session, refreshToken: successor, refreshExpiresAt: expiresAt)
    }

    /// Ends one session; false when it was not live (or not this user's).
    @discardableResult
    static func revoke(
        sessionID: UUID, userID: UUID? = nil, reason: RevokeReason, now: Date, on database: some PostgresQueryable
    ) async throws -> Bool {
        try await database.execute(
            """
            UPDATE sessions SET revoked_at = \(now), revoke_reason = \(reason.rawValue) \
            WHERE id = \(sessionID) AND (\(userID as UUID?)::uuid IS NULL OR user_id = \(userID as UUID?)) \
            AND revoked_at IS NULL
            """) == 1
    }

    /// Ends every live session of the user except `keeping`; returns how many ended.
    @discardableResult
    static func revokeAll(
        userID: UUID, keeping: UUID? = nil, reason: RevokeReason, now: Date, on database: some PostgresQueryable
    ) async throws -> Int {
        try await database.execute(
            """
            UPDATE sessions SET revoked_at = \(now), revoke_reason = \(reason.rawValue) \
            WHERE user_id = \(userID) AND revoked_at IS NULL \
            AND (\(keeping as UUID?)::uuid IS NULL OR id <> \(keeping as UUID?))
            """)
    }

    static func session(id: UUID, userID: UUID, on database: some PostgresQueryable) async throws -> SessionRecord? {
        try await database.queryRow("SELECT * FROM sessions WHERE id = \(id) AND user_id = \(userID)")
            .map(SessionRecord.init(row:))
    }

    /// Live sessions, most recently used first, after the session `after` (a page token) if given.
    static func liveSessions(
        userID: UUID, now: Date, after: UUID?, limit: Int, on database: some PostgresQueryable
    ) async throws -> [SessionRecord] {
        // Keyset pagination on (last_used_at, id), read from the cursor's row so no timestamp is rounded.
        try await database.query(
            """
            SELECT * FROM sessions s \
            WHERE s.user_id = \(userID) AND s.revoked_at IS NULL AND s.expires_at > \(now) \
            AND (\(after as UUID?)::uuid IS NULL OR (s.last_used_at, s.id) < \
                (SELECT c.last_used_at, c.id FROM sessions c \
                WHERE c.id = \(after as UUID?) AND c.user_id = \(userID))) \
            ORDER BY s.last_used_at DESC, s.id DESC LIMIT \(limit)
            """
        ).map(SessionRecord.init(row:))
    }
}
