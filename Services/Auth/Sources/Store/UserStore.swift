internal import Foundation
internal import HabitFlowPostgres
internal import HabitFlowRPC

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

    /// Decodes a row of `user_accounts` (or `users`, without linked providers).
    init(row: PostgresRow) throws {
        id = try row.decode("id")
        email = try row.decode("email")
        emailVerified = try row.decode("email_verified")
        username = try row.decode("username")
        displayName = try row.decode("display_name")
        timeZone = try row.decode("time_zone")
        passwordHash = try row.decode("password_hash")
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
        if row.columns.contains(where: { $0.name == "linked_providers" }) {
            linkedProviders = try row.decode("linked_providers")
        }
    }
}

/// Reads and writes of `users` and `social_identities`. Works on the pool or inside a transaction.
enum UserStore {
    static func user(id: UUID, on database: some PostgresQueryable) async throws -> UserRecord? {
        try await database.queryRow("SELECT * FROM user_accounts WHERE id = \(id)").map(UserRecord.init(row:))
    }

    /// Locks the account row for the rest of the transaction (against concurrent password or email changes).
    static func lockedUser(id: UUID, on transaction: PostgresTransaction) async throws -> UserRecord? {
        guard try await transaction.queryRow("SELECT id FROM users WHERE id = \(id) FOR UPDATE") != nil else {
            return nil
        }
        return try await user(id: id, on: transaction)
    }

    /// The account with this email, ignoring case.
    static func user(email: String, on database: some PostgresQueryable) async throws -> UserRecord? {
        try await database.queryRow("SELECT * FROM user_accounts WHERE lower(email) = lower(\(email))")
            .map(UserRecord.init(row:))
    }

    /// The account with this username, ignoring case.
    static func user(username: String, on database: some PostgresQueryable) async throws -> UserRecord? {
        try await database.queryRow("SELECT * FROM user_accounts WHERE lower(username) = lower(\(username))")
            .map(UserRecord.init(row:))
    }

    static func users(ids: [UUID], on database: some PostgresQueryable) async throws -> [UserRecord] {
        try await database.query("SELECT * FROM user_accounts WHERE id = ANY(\(ids)) ORDER BY id").map(
            UserRecord.init(row:))
    }

    static func users(emails: [String], usernames: [String], on database: some PostgresQueryable) async throws
        -> [UserRecord]
    {
        let emails = emails.map { $0.lowercased() }
        let usernames = usernames.map { $0.lowercased() }
        return try await database.query(
            """
            SELECT * FROM user_accounts \
            WHERE lower(email) = ANY(\(emails)) OR lower(username) = ANY(\(usernames)) ORDER BY id
            """
        ).map(UserRecord.init(row:))
    }

    /// Inserts an account. A taken email or username (also one taken by a concurrent registration, through the
    /// unique indexes) is `ALREADY_EXISTS`.
    static func insert(_ user: UserRecord, on transaction: PostgresTransaction) async throws {
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

    /// Sets the profile fields; a username taken meanwhile is `ALREADY_EXISTS`.
    static func updateProfile(
        id: UUID, username: String, displayName: String, timeZone: String, updatedAt: Date,
        on transaction: PostgresTransaction
    ) async throws {
        do {
            try await transaction.execute(
                """
                UPDATE users SET username = \(username), display_name = \(displayName), time_zone = \(timeZone), \
                updated_at = \(updatedAt) WHERE id = \(id)
                """)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw takenError(error)
        }
    }

    static func setPassword(
        id: UUID, hash: String?, verifiedEmail: Bool? = nil, updatedAt: Date, on transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            UPDATE users SET password_hash = \(hash as String?), \
            email_verified = coalesce(\(verifiedEmail as Bool?), email_verified), updated_at = \(updatedAt) \
            WHERE id = \(id)
            """)
    }

    /// Changes the email (now verified: the token proving it was mailed there). Taken meanwhile: `ALREADY_EXISTS`.
    static func setEmail(id: UUID, email: String, updatedAt: Date, on transaction: PostgresTransaction) async throws {
        do {
            try await transaction.execute(
                """
                UPDATE users SET email = \(email), email_verified = true, updated_at = \(updatedAt) WHERE id = \(id)
                """)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw takenError(error)
        }
    }

    static func markEmailVerified(id: UUID, updatedAt: Date, on transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            "UPDATE users SET email_verified = true, updated_at = \(updatedAt) WHERE id = \(id)")
    }

    /// Deletes the account; sessions, tokens, social identities and pending mail go with it (foreign keys).
    static func delete(id: UUID, on transaction: PostgresTransaction) async throws -> Bool {
        try await transaction.execute("DELETE FROM users WHERE id = \(id)") == 1
    }

    /// Whether some account has this username, ignoring case.
    static func usernameTaken(_ username: String, on database: some PostgresQueryable) async throws -> Bool {
        try await database.queryRow("SELECT 1 FROM users WHERE lower(username) = lower(\(username))") != nil
    }

    // MARK: - Social identities

    static func userID(provider: String, subject: String, on database: some PostgresQueryable) async throws -> UUID? {
        try await database.queryRow(
            "SELECT user_id FROM social_identities WHERE provider = \(provider) AND subject = \(subject)"
        )?.decode(0, as: UUID.self)
    }

    static func linkIdentity(
        provider: String, subject: String, userID: UUID, email: String?, at now: Date,
        on transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO social_identities (provider, subject, user_id, email, created_at) \
            VALUES (\(provider), \(subject), \(userID), \(email as String?), \(now))
            """)
    }

    /// Whether `userID` has linked `provider` under `subject`.
    static func hasIdentity(userID: UUID, provider: String, subject: String, on database: some PostgresQueryable)
        async throws -> Bool
    {
        try await database.queryRow(
            """
            SELECT 1 FROM social_identities \
            WHERE user_id = \(userID) AND provider = \(provider) AND subject = \(subject)
            """) != nil
    }

    static let emailInUse = RPCError.alreadyExists(
        resourceType: "user", name: "email", "an account with this email already exists")
    static let usernameInUse = RPCError.alreadyExists(resourceType: "user", name: "username", "the username is taken")

    /// The unique index a violation hit, as the error the client sees.
    private static func takenError(_ error: PostgresError) -> RPCError {
        error.constraint == "users_username_key" ? usernameInUse : emailInUse
    }
}
