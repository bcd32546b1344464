internal import Foundation
internal import HabitFlowPostgres

/// `one_time_tokens`: single-use, expiring tokens for password reset and email change, stored hashed, and the
/// writes that make and use them (with their mail, in the same transaction).
extension AuthStore {
    /// The account a token would act for, without using it up (nil when it could not be used now).
    func pendingToken(presented: String, purpose: OneTimeTokenPurpose, now: Date) async throws
        -> (userID: UUID, newEmail: String?)?
    {
        guard let hash = OpaqueToken.hash(of: presented) else { return nil }
        guard
            let row = try await pool.queryRow(
                """
                SELECT user_id, new_email FROM one_time_tokens \
                WHERE token_hash = \(hash) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now)
                """)
        else { return nil }
        return (try row.decode("user_id"), try row.decode("new_email"))
    }

    // MARK: - Password reset

    /// Makes a reset token for the account with `email` and queues its mail; false (and nothing written) when no
    /// account has that email.
    func requestPasswordReset(email: String, lifetime: Duration, linkBaseURL: String, now: Date) async throws -> Bool {
        try await pool.transaction { transaction in
            guard let user = try await user(transaction, email: email) else { return false }
            let token = try await issueToken(
                transaction, userID: user.id, purpose: .passwordReset, now: now, lifetime: lifetime)
            try await enqueueMail(
                transaction, .passwordReset(to: user, token: token, linkBaseURL: linkBaseURL), userID: user.id,
                now: now)
            return true
        }
    }

    /// Uses up the reset token of `userID` and sets the new password hash. The mail reached the owner of the
    /// address: it is verified, and every session ends. ``AuthError/invalidToken`` when the token cannot be used
    /// (also when it was used meanwhile).
    func resetPassword(token presented: String, userID: UUID, hash: String, now: Date) async throws {
        try await pool.transaction { transaction in
            guard
                let used = try await consumeToken(
                    transaction, presented: presented, purpose: .passwordReset, now: now),
                used.userID == userID
            else { throw AuthError.invalidToken }
            try await setPassword(transaction, id: userID, hash: hash, verifiedEmail: true, updatedAt: now)
            try await revokeSessions(transaction, userID: userID, reason: .passwordReset, now: now)
        }
    }

    // MARK: - Email change

    /// Makes an email-change token and mails it to the new address.
    func requestEmailChange(
        user: UserRecord, newEmail: String, lifetime: Duration, linkBaseURL: String, now: Date
    ) async throws {
        try await pool.transaction { transaction in
            let token = try await issueToken(
                transaction, userID: user.id, purpose: .emailChange, newEmail: newEmail, now: now, lifetime: lifetime)
            try await enqueueMail(
                transaction, .emailChange(of: user, to: newEmail, token: token, linkBaseURL: linkBaseURL),
                userID: user.id, now: now)
        }
    }

    /// Uses up an email-change token, sets the new email and tells the old address. Returns the account as
    /// stored; ``AuthError/invalidToken`` when the token cannot be used.
    func confirmEmailChange(token presented: String, now: Date) async throws -> UserRecord {
        try await pool.transaction { transaction in
            guard
                let used = try await consumeToken(transaction, presented: presented, purpose: .emailChange, now: now),
                let newEmail = used.newEmail,
                let previous = try await lockedUser(transaction, id: used.userID)
            else { throw AuthError.invalidToken }
            try await setEmail(transaction, id: previous.id, email: newEmail, updatedAt: now)
            try await enqueueMail(transaction, .emailChanged(of: previous, to: newEmail), userID: previous.id, now: now)
            guard let updated = try await user(transaction, id: previous.id) else {
                throw AuthInvariantFailure("the account vanished while its email changed")
            }
            return updated
        }
    }

    // MARK: - Statements of the transactions above

    /// A new token for `userID`; earlier unused tokens of the same purpose stop working (only the latest mail counts).
    private func issueToken(
        _ transaction: PostgresTransaction, userID: UUID, purpose: OneTimeTokenPurpose, newEmail: String? = nil,
        now: Date, lifetime: Duration
    ) async throws -> OpaqueToken {
        try await transaction.execute(
            """
            UPDATE one_time_tokens SET used_at = \(now) \
            WHERE user_id = \(userID) AND purpose = \(purpose.rawValue) AND used_at IS NULL
            """)
        let token = OpaqueToken()
        try await transaction.execute(
            """
            INSERT INTO one_time_tokens (token_hash, user_id, purpose, new_email, created_at, expires_at) \
            VALUES (\(token.hash), \(userID), \(purpose.rawValue), \(newEmail as String?), \(now), \
            \(now.addingTimeInterval(lifetime.timeInterval)))
            """)
        return token
    }

    /// Uses the token up, atomically: of two concurrent uses one wins. Returns its account (and new email) or nil
    /// when it is unknown, used, expired or for another purpose.
    private func consumeToken(
        _ transaction: PostgresTransaction, presented: String, purpose: OneTimeTokenPurpose, now: Date
    ) async throws -> (userID: UUID, newEmail: String?)? {
        guard let hash = OpaqueToken.hash(of: presented) else { return nil }
        guard
            let row = try await transaction.queryRow(
                """
                UPDATE one_time_tokens SET used_at = \(now) \
                WHERE token_hash = \(hash) AND purpose = \(purpose.rawValue) \
                AND used_at IS NULL AND expires_at > \(now) \
                RETURNING user_id, new_email
                """)
        else { return nil }
        return (try row.decode("user_id"), try row.decode("new_email"))
    }
}
