internal import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// `sessions` and `refresh_tokens`: signed-in devices and their rotating refresh tokens.
extension AuthStore {
    // MARK: - Reads

    func session(id: UUID, userID: UUID) async throws -> SessionRecord? {
        try await pool.queryRow("SELECT * FROM sessions WHERE id = \(id) AND user_id = \(userID)")
            .map(SessionRecord.init(row:))
    }

    /// Every session the service holds of the user, live and ended (until clean-up removes it), oldest first.
    func sessions(userID: UUID) async throws -> [SessionRecord] {
        try await pool.query("SELECT * FROM sessions WHERE user_id = \(userID) ORDER BY created_at, id")
            .map(SessionRecord.init(row:))
    }

    /// Live sessions, most recently used first, after the session `after` (a page token) if given.
    func liveSessions(userID: UUID, now: Date, after: UUID?, limit: Int) async throws -> [SessionRecord] {
        // Keyset pagination on (last_used_at, id), read from the cursor's row so no timestamp is rounded.
        try await pool.query(
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

    // MARK: - Writes

    /// Opens a session in its own transaction, retrying once when a concurrent sign-in on the same device took the
    /// device's slot first (the one-live-session-per-device index).
    func openSession(userID: UUID, device: DeviceDetails, clientAddress: String, lifetime: Duration, now: Date)
        async throws -> OpenedSession
    {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await pool.transaction { transaction in
                    try await openSession(
                        transaction, userID: userID, device: device, clientAddress: clientAddress, lifetime: lifetime,
                        now: now)
                }
            } catch let error as PostgresError
                where error.violates("sessions_one_live_per_device_key") && attempt < 3
            {
                continue
            }
        }
    }

    /// Uses up a refresh token and issues its successor, extending the session by `lifetime`. A token used before
    /// revokes its session. The transaction commits in every outcome: a reused token's session stays revoked
    /// although the call fails.
    func rotateRefreshToken(presented: String, now: Date, lifetime: Duration) async throws -> RefreshOutcome {
        guard let hash = OpaqueToken.hash(of: presented) else { return .invalid }
        let expiresAt = now.addingTimeInterval(lifetime.timeInterval)
        let successor = OpaqueToken()
        // The usual case, an unused token of a live session, in one statement. It locks the token's row first, as
        // the transaction below does (the other order deadlocks against it), extends the session, then uses the
        // token and issues the successor only where the session was extended. A concurrent use of the same token
        // (the locked row, checked again, is used by then) or end of the session leaves everything as it was and no
        // answer, and the transaction finds out which it was.
        if let row = try await pool.queryRow(
            """
            WITH token AS (SELECT session_id FROM refresh_tokens \
            WHERE token_hash = \(hash) AND used_at IS NULL AND expires_at > \(now) FOR UPDATE), \
            session AS (UPDATE sessions SET last_used_at = \(now), expires_at = \(expiresAt) \
            WHERE id IN (SELECT session_id FROM token) AND revoked_at IS NULL AND expires_at > \(now) RETURNING *), \
            used AS (UPDATE refresh_tokens SET used_at = \(now) \
            WHERE token_hash = \(hash) AND session_id IN (SELECT id FROM session) RETURNING session_id), \
            successor AS (INSERT INTO refresh_tokens (token_hash, session_id, user_id, created_at, expires_at) \
            SELECT \(successor.hash), id, user_id, \(now), \(expiresAt) FROM session \
            WHERE id IN (SELECT session_id FROM used)) \
            SELECT * FROM session WHERE id IN (SELECT session_id FROM used)
            """)
        {
            return .rotated(try SessionRecord(row: row), refreshToken: successor, refreshExpiresAt: expiresAt)
        }
        return try await pool.transaction { transaction in
            // Lock the token row: of two concurrent uses of one token, the second sees it used.
            guard
                let token = try await transaction.queryRow(
                    "SELECT session_id, expires_at, used_at FROM refresh_tokens WHERE token_hash = \(hash) FOR UPDATE")
            else { return .invalid }
            let sessionID = try token.decode("session_id", as: UUID.self)
            if try token.decode("used_at", as: Date?.self) != nil {
                try await revokeSession(transaction, id: sessionID, reason: .refreshTokenReuse, now: now)
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
            guard
                let updated = try await transaction.queryRow(
                    """
                    UPDATE sessions SET last_used_at = \(now), expires_at = \(expiresAt) WHERE id = \(sessionID) \
                    RETURNING *
                    """)
            else { return .invalid }
            let session = try SessionRecord(row: updated)
            let successor = try await addRefreshToken(transaction, session: session, now: now, expiresAt: expiresAt)
            return .rotated(session, refreshToken: successor, refreshExpiresAt: expiresAt)
        }
    }

    /// Ends one of the user's sessions; false when it was not live (or not this user's).
    @discardableResult
    func revokeSession(id: UUID, userID: UUID, reason: RevokeReason, now: Date) async throws -> Bool {
        try await revokeSession(pool, id: id, userID: userID, reason: reason, now: now)
    }

    /// Ends every live session of the user except `keeping`; returns how many ended.
    @discardableResult
    func revokeSessions(userID: UUID, keeping: UUID? = nil, reason: RevokeReason, now: Date) async throws -> Int {
        try await revokeSessions(pool, userID: userID, keeping: keeping, reason: reason, now: now)
    }

    // MARK: - Statements of the transactions above

    /// Opens a session with its first refresh token. A session of the same device (same device id) ends: one per
    /// device.
    func openSession(
        _ transaction: PostgresTransaction, userID: UUID, device: DeviceDetails, clientAddress: String,
        lifetime: Duration, now: Date
    ) async throws -> OpenedSession {
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
        let token = try await addRefreshToken(transaction, session: session, now: now, expiresAt: expiresAt)
        return OpenedSession(session: session, refreshToken: token)
    }

    private func addRefreshToken(
        _ transaction: PostgresTransaction, session: SessionRecord, now: Date, expiresAt: Date
    ) async throws -> OpaqueToken {
        let token = OpaqueToken()
        try await transaction.execute(
            """
            INSERT INTO refresh_tokens (token_hash, session_id, user_id, created_at, expires_at) \
            VALUES (\(token.hash), \(session.id), \(session.userID), \(now), \(expiresAt))
            """)
        return token
    }

    @discardableResult
    func revokeSession(
        _ database: some PostgresQueryable, id: UUID, userID: UUID? = nil, reason: RevokeReason, now: Date
    ) async throws -> Bool {
        try await database.execute(
            """
            UPDATE sessions SET revoked_at = \(now), revoke_reason = \(reason.rawValue) \
            WHERE id = \(id) AND (\(userID as UUID?)::uuid IS NULL OR user_id = \(userID as UUID?)) \
            AND revoked_at IS NULL
            """) == 1
    }

    @discardableResult
    func revokeSessions(
        _ database: some PostgresQueryable, userID: UUID, keeping: UUID? = nil, reason: RevokeReason, now: Date
    ) async throws -> Int {
        try await database.execute(
            """
            UPDATE sessions SET revoked_at = \(now), revoke_reason = \(reason.rawValue) \
            WHERE user_id = \(userID) AND revoked_at IS NULL \
            AND (\(keeping as UUID?)::uuid IS NULL OR id <> \(keeping as UUID?))
            """)
    }
}
