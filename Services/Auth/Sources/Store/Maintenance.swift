internal import Foundation
internal import HabitFlowPostgres
internal import Logging

/// Ended sessions are kept this long (a user may ask "where was I signed in?"), then deleted with their tokens.
private let endedSessionRetention: TimeInterval = 30 * 24 * 3600

extension AuthStore {
    /// Removes rows nothing needs any more at `now`: sessions ended a month ago, expired refresh and one-time tokens,
    /// old throttle state, keys past `not_after`. Idempotent: any replica may run it.
    func removeStaleRows(now: Date) async throws {
        let sessionCutoff = now.addingTimeInterval(-endedSessionRetention)
        let dayAgo = now.addingTimeInterval(-24 * 3600)
        // Refresh tokens go with their sessions; a used token must outlive its use to expose reuse, but not its expiry.
        try await pool.execute(
            "DELETE FROM sessions WHERE revoked_at < \(sessionCutoff) OR expires_at < \(sessionCutoff)")
        try await pool.execute("DELETE FROM refresh_tokens WHERE expires_at < \(now)")
        try await pool.execute("DELETE FROM one_time_tokens WHERE expires_at < \(dayAgo)")
        try await pool.execute(
            """
            DELETE FROM throttle_state WHERE window_started_at < \(dayAgo) \
            AND (blocked_until IS NULL OR blocked_until < \(now))
            """)
        try await deleteSigningKeys(notAfterBefore: now.addingTimeInterval(-3600))
    }
}

/// Removes rows nothing needs any more (``AuthStore/removeStaleRows(now:)``) every
/// ``AuthSettings/maintenanceInterval``, so the tables stay the size of what is live.
struct Maintenance: Sendable {
    let store: AuthStore
    let settings: AuthSettings
    let logger: Logger

    func run() async {
        guard let interval = settings.maintenanceInterval else { return }
        while !Task.isCancelled {
            do {
                try await removeStaleRows()
            } catch is CancellationError {
                return
            } catch {
                logger.warning("auth maintenance failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }

    func removeStaleRows() async throws {
        try await store.removeStaleRows(now: settings.clock.now())
    }
}
