internal import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto

/// `mail_outbox`: mail is written in the transaction that makes its token, and sent after commit by
/// ``MailDispatcher``.
extension AuthStore {
    /// Queues one mail on its own (the writes above queue theirs inside their transaction).
    func enqueueMail(_ mail: AccountMail, userID: UUID?, now: Date) async throws {
        try await enqueueMail(pool, mail, userID: userID, now: now)
    }

    /// Claims up to `limit` due mails for `lease` (their next attempt moves past it), so replicas sending at the
    /// same time never pick the same mail; a sender that dies leaves them due again when the lease ends.
    func claimDueMail(now: Date, lease: Duration, limit: Int) async throws -> [OutgoingMail] {
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
    func deleteMail(id: UUID) async throws {
        try await pool.execute("DELETE FROM mail_outbox WHERE id = \(id)")
    }

    func recordMailFailure(id: UUID, error: String, retryAt: Date) async throws {
        try await pool.execute(
            """
            UPDATE mail_outbox SET attempts = attempts + 1, last_error = \(String(error.prefix(500))), \
            next_attempt_at = \(retryAt) WHERE id = \(id)
            """)
    }

    func enqueueMail(_ database: some PostgresQueryable, _ mail: AccountMail, userID: UUID?, now: Date) async throws {
        try await database.execute(
            """
            INSERT INTO mail_outbox (id, user_id, recipient, subject, body, created_at, next_attempt_at) \
            VALUES (\(UUID.random()), \(userID as UUID?), \(mail.recipient), \(mail.subject), \(mail.body), \(now), \
            \(now))
            """)
    }
}
