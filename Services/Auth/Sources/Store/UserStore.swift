internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowPostgres
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// `users` and the `user_accounts` view: accounts, their profile, password, email and deletion.
extension AuthStore {
    // MARK: - Reads

    func user(id: UUID) async throws -> UserRecord? {
        try await user(pool, id: id)
    }

    /// The account with this email, ignoring case.
    func user(email: String) async throws -> UserRecord? {
        try await user(pool, email: email)
    }

    /// The account with this username, ignoring case.
    func user(username: String) async throws -> UserRecord? {
        try await pool.queryRow("SELECT * FROM user_accounts WHERE lower(username) = lower(\(username))")
            .map(UserRecord.init(row:))
    }

    /// The caller's account; ``AuthError/userNotFound(_:)`` when it was deleted while the access token still lives.
    func requireUser(_ userID: UUID) async throws -> UserRecord {
        try await requireUser(pool, id: userID)
    }

    func users(ids: [UUID]) async throws -> [UserRecord] {
        try await pool.query("SELECT * FROM user_accounts WHERE id = ANY(\(ids)) ORDER BY id").map(
            UserRecord.init(row:))
    }

    func users(emails: [String], usernames: [String]) async throws -> [UserRecord] {
        let emails = emails.map { $0.lowercased() }
        let usernames = usernames.map { $0.lowercased() }
        return try await pool.query(
            """
            SELECT * FROM user_accounts \
            WHERE lower(email) = ANY(\(emails)) OR lower(username) = ANY(\(usernames)) ORDER BY id
            """
        ).map(UserRecord.init(row:))
    }

    /// Whether some account has this username, ignoring case.
    func usernameTaken(_ username: String) async throws -> Bool {
        try await pool.queryRow("SELECT 1 FROM users WHERE lower(username) = lower(\(username))") != nil
    }

    // MARK: - Writes

    /// Creates the account, publishes UserCreated and opens its first session, in one transaction. Returns the
    /// account as stored (timestamps at the database's precision, so it equals what GetProfile returns later).
    func register(
        _ user: UserRecord, device: DeviceDetails, clientAddress: String, sessionLifetime: Duration, now: Date
    ) async throws -> (user: UserRecord, session: OpenedSession) {
        try await pool.transaction { transaction in
            try await insertUser(transaction, user)
            try await appendUserEvent(transaction, userCreatedEvent(user), userID: user.id)
            let session = try await openSession(
                transaction, userID: user.id, device: device, clientAddress: clientAddress, lifetime: sessionLifetime,
                now: now)
            return (try await requireUser(transaction, id: user.id), session)
        }
    }

    /// Applies `change` under the account's lock and publishes UserUpdated when something changed. Returns the
    /// account as stored.
    func updateProfile(userID: UUID, change: ProfileChange, now: Date) async throws -> UserRecord {
        try await pool.transaction { transaction in
            guard let current = try await lockedUser(transaction, id: userID) else {
                throw AuthError.userNotFound(userID)
            }
            var next = change.applied(to: current)
            guard
                next.username != current.username || next.displayName != current.displayName
                    || next.timeZone != current.timeZone
            else { return current }
            next.updatedAt = now
            do {
                try await transaction.execute(
                    """
                    UPDATE users SET username = \(next.username), display_name = \(next.displayName), \
                    time_zone = \(next.timeZone), updated_at = \(next.updatedAt) WHERE id = \(userID)
                    """)
            } catch let error as PostgresError where error.kind == .uniqueViolation {
                throw takenError(error)
            }
            var event = Habitflow_Events_V1_UserUpdated()
            event.userID = userID.lowercasedString
            event.username = next.username
            event.displayName = next.displayName
            event.timeZone = next.timeZone
            event.updatedAt = Google_Protobuf_Timestamp(date: next.updatedAt)
            try await appendUserEvent(transaction, event, userID: userID)
            return try await requireUser(transaction, id: userID)
        }
    }

    /// Sets the new password hash and signs out every session but `keeping`: whoever knew the old password is
    /// signed out everywhere but there.
    func changePassword(userID: UUID, hash: String, keeping sessionID: UUID, now: Date) async throws {
        try await pool.transaction { transaction in
            try await setPassword(transaction, id: userID, hash: hash, updatedAt: now)
            try await revokeSessions(
                transaction, userID: userID, keeping: sessionID, reason: .passwordChanged, now: now)
        }
    }

    /// Deletes the account (sessions, tokens, social identities and pending mail go with it, by foreign keys) and
    /// publishes UserDeleted.
    func deleteAccount(userID: UUID, now: Date) async throws {
        try await pool.transaction { transaction in
            guard try await transaction.execute("DELETE FROM users WHERE id = \(userID)") == 1 else {
                throw AuthError.userNotFound(userID)
            }
            var event = Habitflow_Events_V1_UserDeleted()
            event.userID = userID.lowercasedString
            event.deletedAt = Google_Protobuf_Timestamp(date: now)
            try await appendUserEvent(transaction, event, userID: userID)
        }
    }

    // MARK: - Statements of the transactions above

    func user(_ database: some PostgresQueryable, id: UUID) async throws -> UserRecord? {
        try await database.queryRow("SELECT * FROM user_accounts WHERE id = \(id)").map(UserRecord.init(row:))
    }

    func user(_ database: some PostgresQueryable, email: String) async throws -> UserRecord? {
        try await database.queryRow("SELECT * FROM user_accounts WHERE lower(email) = lower(\(email))")
            .map(UserRecord.init(row:))
    }

    func requireUser(_ database: some PostgresQueryable, id: UUID) async throws -> UserRecord {
        guard let user = try await user(database, id: id) else { throw AuthError.userNotFound(id) }
        return user
    }

    /// Locks the account row for the rest of the transaction (against concurrent password or email changes).
    func lockedUser(_ transaction: PostgresTransaction, id: UUID) async throws -> UserRecord? {
        guard try await transaction.queryRow("SELECT id FROM users WHERE id = \(id) FOR UPDATE") != nil else {
            return nil
        }
        return try await user(transaction, id: id)
    }

    /// Inserts an account. A taken email or username (also one taken by a concurrent registration, through the
    /// unique indexes) is ``AuthError/emailInUse`` or ``AuthError/usernameInUse``.
    func insertUser(_ transaction: PostgresTransaction, _ user: UserRecord) async throws {
        do {
            try await transaction.execute(
                """
                INSERT INTO users (id, email, email_verified, username, display_name, time_zone, password_hash, \
                created_at, updated_at) VALUES (\(user.id), \(user.email), \(user.emailVerified), \(user.username), \
                \(user.displayName), \(user.timeZone), \(user.passwordHash as String?), \(user.createdAt), \
                \(user.updatedAt))
                """)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw takenError(error)
        }
    }

    func setPassword(
        _ transaction: PostgresTransaction, id: UUID, hash: String?, verifiedEmail: Bool? = nil, updatedAt: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE users SET password_hash = \(hash as String?), \
            email_verified = coalesce(\(verifiedEmail as Bool?), email_verified), updated_at = \(updatedAt) \
            WHERE id = \(id)
            """)
    }

    /// Changes the email (now verified: the token proving it was mailed there). Taken meanwhile: `emailInUse`.
    func setEmail(_ transaction: PostgresTransaction, id: UUID, email: String, updatedAt: Date) async throws {
        do {
            try await transaction.execute(
                """
                UPDATE users SET email = \(email), email_verified = true, updated_at = \(updatedAt) WHERE id = \(id)
                """)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw takenError(error)
        }
    }

    /// The unique index a violation hit, as the domain error.
    private func takenError(_ error: PostgresError) -> AuthError {
        error.constraint == "users_username_key" ? .usernameInUse : .emailInUse
    }
}
