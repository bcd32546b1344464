internal import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// What a one-time token is for.
enum OneTimeTokenPurpose: String, Sendable {
    case passwordReset = "password_reset"
    case emailChange = "email_change"
}

/// Single-use, expiring tokens for password reset and email change (`one_time_tokens`), stored hashed.
enum OneTimeTokenStore {
    /// A new token for `userID`; earlier unused tokens of the same purpose stop working (only the latest mail counts).
    static func issue(
        userID: UUID, purpose: OneTimeTokenPurpose, newEmail: String? = nil, now: Date, lifetime: Duration,
        on transaction: PostgresTransaction
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

    /// The account a token would act for, without using it up (nil when it could not be used now).
    static func peek(
        presented: String, purpose: OneTimeTokenPurpose, now: Date, on database: some PostgresQueryable
    ) async throws -> (userID: UUID, newEmail: String?)? {
        guard let hash = OpaqueToken.hash(of: presented) else { return nil }
        guard
            let row = try await database.queryRow(
                """
                SELECT user_id, new_email FROM one_time_tokens \
                WHERE token_hash = \(hash) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now)
                """)
        else { return nil }
        return (try row.decode("user_id"), try row.decode("new_email"))
    }

    /// Uses the token up, atomically: of two concurrent uses one wins. Returns its account (and new email) or nil
    /// when it is unknown, used, expired or for another purpose.
    static func consume(
        presented: String, purpose: OneTimeTokenPurpose, now: Date, on transaction: PostgresTransaction
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

/// A mail waiting in `mail_outbox`.
struct OutgoingMail: Sendable {
    var id: UUID
    var recipient: String
    var subject: String
    var body: String
    var attempts: Int
}

/// The mail outbox: mail is written in the transaction that makes its token, and sent after commit by
/// ``MailDispatcher``.
enum MailOutboxStore {
    static func enqueue(
        to recipient: String, subject: String, body: String, userID: UUID?, now: Date,
        on transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO mail_outbox (id, user_id, recipient, subject, body, created_at, next_attempt_at) \
            VALUES (\(UUID.random()), \(userID as UUID?), \(recipient), \(subject), \(body), \(now), \(now))
            """)
    }

    /// Claims up to `limit` due mails for `lease` (their next attempt moves past it), so replicas sending at the
    /// same time never pick the same mail; a sender that dies leaves them due again when the lease ends.
    static func claimDue(now: Date, lease: Duration, limit: Int, on pool: PostgresPool) async throws -> [OutgoingMail] {
        let leaseEnd = now.addingTimeInterval(lease.timeInterval)
        return try await pool.query(
            """
            UPDATE mail_outbox SET next_attempt_at = \(leaseEnd) WHERE id IN ( \
                SELECT id FROM mail_outbox WHERE next_attempt_at <= \(now) ORDER BY next_attempt_at, id \
                LIMIT \(limit) FOR UPDATE SKIP LOCKED) \
            RETURNING id, recipient, subject, body, attempts
            """
        ).map { row in
            OutgoingMail(
                id: try row.decode("id"), recipient: try row.decode("recipient"), subject: try row.decode("subject"),
                body: try row.decode("body"), attempts: try row.decode("attempts"))
        }
    }

    /// A sent mail is deleted: it carries a live token.
    static func delete(id: UUID, on pool: PostgresPool) async throws {
        try await pool.execute("DELETE FROM mail_outbox WHERE id = \(id)")
    }

    static func recordFailure(id: UUID, error: String, retryAt: Date, on pool: PostgresPool) async throws {
        try await pool.execute(
            """
            UPDATE mail_outbox SET attempts = attempts + 1, last_error = \(String(error.prefix(500))), \
            next_attempt_at = \(retryAt) WHERE id = \(id)
            """)
    }
}
