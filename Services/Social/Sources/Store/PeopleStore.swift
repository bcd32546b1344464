internal import Foundation
internal import HabitFlowPostgres

/// The names friends see (`users.username`, `users.display_name`): kept current from auth's account events, and
/// filled from auth's lookup when a request or block names a user the events have not told about yet.
extension SocialStore {
    /// Applies names from an account event unless later names were applied already (last write wins by event time).
    func applyNames(
        _ transaction: PostgresTransaction, user userID: UUID, username: String, displayName: String, changedAt: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE users SET username = \(username), display_name = \(displayName), names_changed_at = \(changedAt) \
            WHERE user_id = \(userID) AND (names_changed_at IS NULL OR names_changed_at <= \(changedAt))
            """)
    }

    /// Fills in names auth's lookup answered for a user no event has named yet (events stay the authority).
    func rememberNames(_ transaction: PostgresTransaction, _ person: PersonRecord) async throws {
        try await transaction.execute(
            """
            UPDATE users SET username = \(person.username), display_name = \(person.displayName) \
            WHERE user_id = \(person.id) AND names_changed_at IS NULL
            """)
    }

    /// Whether the account was deleted (nothing of it is re-created; requests to it behave like ones to nobody).
    func isDeleted(_ userID: UUID) async throws -> Bool {
        try await pool.queryRow("SELECT 1 FROM deleted_users WHERE user_id = \(userID)") != nil
    }
}
