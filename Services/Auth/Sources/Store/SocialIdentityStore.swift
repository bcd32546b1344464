internal import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// `social_identities`: Google and Apple identities linked to accounts, and the sign-in that finds or makes the
/// account of one.
extension AuthStore {
    /// Whether `userID` has linked `provider` under `subject`.
    func hasIdentity(userID: UUID, provider: SocialProviderName, subject: String) async throws -> Bool {
        try await pool.queryRow(
            """
            SELECT 1 FROM social_identities \
            WHERE user_id = \(userID) AND provider = \(provider.rawValue) AND subject = \(subject)
            """) != nil
    }

    /// The identities linked to the account, in the order they were linked.
    func linkedIdentities(userID: UUID) async throws -> [LinkedIdentityRecord] {
        try await pool.query(
            "SELECT * FROM social_identities WHERE user_id = \(userID) ORDER BY created_at, provider, subject"
        ).map(LinkedIdentityRecord.init(row:))
    }

    /// The account of a verified identity: the one linked to it, else the one with its verified email (linked now),
    /// else a new one without a password, in `timeZone`. Returns whether it was created.
    ///
    /// - Parameter email: the identity's email when the provider vouched for it and it is a valid address; nil:
    ///   an identity that is not linked yet is refused (``AuthError/emailNotVerified``).
    func signIn(identity: VerifiedIdentity, email: String?, timeZone: String, now: Date) async throws
        -> (user: UserRecord, created: Bool)
    {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await signInOnce(identity: identity, email: email, timeZone: timeZone, now: now)
            } catch let error as PostgresError where error.kind == .uniqueViolation && attempt < 3 {
                continue  // a concurrent sign-in linked the identity or took the email first: look again
            } catch AuthError.emailInUse where attempt < 3 {
                continue
            }
        }
    }

    private func signInOnce(identity: VerifiedIdentity, email: String?, timeZone: String, now: Date) async throws
        -> (user: UserRecord, created: Bool)
    {
        let provider = identity.provider.rawValue
        if let row = try await pool.queryRow(
            "SELECT user_id FROM social_identities WHERE provider = \(provider) AND subject = \(identity.subject)")
        {
            return (try await requireUser(try row.decode(0, as: UUID.self)), false)
        }
        guard let email else { throw AuthError.emailNotVerified }
        return try await pool.transaction { transaction in
            if let existing = try await user(transaction, email: email),
                let locked = try await lockedUser(transaction, id: existing.id)
            {
                if !locked.emailVerified {
                    // Nobody proved they own this address until now. Whoever registered it may not be its owner
                    // (account pre-hijacking): their password and sessions stop working; the owner can set a
                    // password by reset.
                    try await setPassword(transaction, id: locked.id, hash: nil, verifiedEmail: true, updatedAt: now)
                    try await revokeSessions(transaction, userID: locked.id, reason: .socialLink, now: now)
                }
                try await linkIdentity(transaction, identity, userID: locked.id, email: email, now: now)
                return (try await requireUser(transaction, id: locked.id), false)
            }
            let user = try await createSocialUser(transaction, email: email, timeZone: timeZone, now: now)
            try await linkIdentity(transaction, identity, userID: user.id, email: email, now: now)
            try await appendUserEvent(transaction, userCreatedEvent(user), userID: user.id)
            return (try await requireUser(transaction, id: user.id), true)
        }
    }

    /// A new account without a password, its username made from the email's local part (with a random suffix
    /// when taken).
    private func createSocialUser(_ transaction: PostgresTransaction, email: String, timeZone: String, now: Date)
        async throws -> UserRecord
    {
        for candidate in AccountRules.usernameCandidates(fromEmail: email) {
            let user = UserRecord(
                id: UUID.random(), email: email, emailVerified: true, username: candidate, displayName: candidate,
                timeZone: timeZone, passwordHash: nil, createdAt: now, updatedAt: now)
            do {
                try await transaction.savepoint { savepoint in try await insertUser(savepoint, user) }
                return user
            } catch AuthError.usernameInUse {
                continue
            }
        }
        throw AuthError.noFreeUsername
    }

    private func linkIdentity(
        _ transaction: PostgresTransaction, _ identity: VerifiedIdentity, userID: UUID, email: String?, now: Date
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO social_identities (provider, subject, user_id, email, created_at) \
            VALUES (\(identity.provider.rawValue), \(identity.subject), \(userID), \(email as String?), \(now))
            """)
    }
}
