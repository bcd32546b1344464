internal import Foundation
internal import HabitFlowPostgres

/// `throttle_state`: attempt counters in Postgres, so every replica sees the same counts.
extension AuthStore {
    /// Throws ``AuthError/tooManyAttempts(retryAfter:)`` when any of `keys` must still wait at `now`.
    func checkThrottle(_ keys: [ThrottleKey], now: Date) async throws {
        var longestWait: TimeInterval = 0
        for key in keys {
            let row = try await pool.queryRow(
                """
                SELECT blocked_until FROM throttle_state \
                WHERE scope = \(key.scope.rawValue) AND subject_hash = \(key.subjectHash) AND blocked_until > \(now)
                """)
            if let blockedUntil = try row?.decode(0, as: Date.self) {
                longestWait = max(longestWait, blockedUntil.timeIntervalSince(now))
            }
        }
        if longestWait > 0 {
            throw AuthError.tooManyAttempts(retryAfter: .milliseconds(Int64((longestWait * 1000).rounded(.up))))
        }
    }

    /// Counts one attempt against `key`; over the policy's limit the subject must wait before the next.
    func recordAttempt(_ key: ThrottleKey, policy: ThrottlePolicy, now: Date) async throws {
        let windowStartedBefore = now.addingTimeInterval(-policy.window.timeInterval)
        // One statement per attempt: concurrent failures on several replicas each add one.
        let row = try await pool.queryRow(
            """
            INSERT INTO throttle_state AS t (scope, subject_hash, failures, window_started_at) \
            VALUES (\(key.scope.rawValue), \(key.subjectHash), 1, \(now)) \
            ON CONFLICT (scope, subject_hash) DO UPDATE SET \
                failures = CASE WHEN t.window_started_at < \(windowStartedBefore) THEN 1 ELSE t.failures + 1 END, \
                window_started_at = CASE WHEN t.window_started_at < \(windowStartedBefore) THEN \(now) \
                    ELSE t.window_started_at END, \
                blocked_until = CASE WHEN t.window_started_at < \(windowStartedBefore) THEN NULL \
                    ELSE t.blocked_until END \
            RETURNING failures
            """)
        let attempts = try row?.decode(0, as: Int.self) ?? 1
        if let delay = policy.delay(afterAttempts: attempts) {
            let blockedUntil = now.addingTimeInterval(delay.timeInterval)
            try await pool.execute(
                """
                UPDATE throttle_state SET blocked_until = GREATEST(blocked_until, \(blockedUntil)) \
                WHERE scope = \(key.scope.rawValue) AND subject_hash = \(key.subjectHash)
                """)
        }
    }

    /// Forgets `key`'s attempts (a successful login clears its account's count).
    func resetThrottle(_ key: ThrottleKey) async throws {
        try await pool.execute(
            "DELETE FROM throttle_state WHERE scope = \(key.scope.rawValue) AND subject_hash = \(key.subjectHash)")
    }
}
