internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowPostgres
internal import HabitFlowRPC

/// How many attempts a subject gets before it is made to wait, and how the wait grows.
public struct ThrottlePolicy: Sendable {
    /// Attempts allowed within ``window`` before any wait.
    public var freeAttempts: Int
    /// Attempts older than this are forgotten (the count restarts).
    public var window: Duration
    /// The wait after the first attempt over the limit; doubled for each further one, up to ``maximumDelay``.
    public var initialDelay: Duration
    public var maximumDelay: Duration

    public init(freeAttempts: Int, window: Duration, initialDelay: Duration, maximumDelay: Duration) {
        self.freeAttempts = freeAttempts
        self.window = window
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The wait after `attempts` attempts in the current window, or nil while under the limit.
    func delay(afterAttempts attempts: Int) -> Duration? {
        guard attempts > freeAttempts else { return nil }
        let doublings = min(attempts - freeAttempts - 1, 30)
        return min(initialDelay * (1 << doublings), maximumDelay)
    }
}

/// What is being counted: failed logins per account or per client address, reset requests per email or per address.
enum ThrottleScope: String, Sendable {
    case loginAccount = "login_account"
    case loginAddress = "login_address"
    case resetEmail = "reset_email"
    case resetAddress = "reset_address"
}

/// One counted subject: a scope and a subject (account id, normalized email or address), stored hashed.
struct ThrottleKey: Sendable {
    var scope: ThrottleScope
    var subjectHash: Data

    init(_ scope: ThrottleScope, _ subject: String) {
        self.scope = scope
        self.subjectHash = Data(SHA256.hash(Array(subject.utf8)))
    }
}

/// Attempt counters in Postgres (`throttle_state`), so every replica sees the same counts.
struct Throttle: Sendable {
    let pool: PostgresPool
    let clock: any AuthClock

    /// Throws `RESOURCE_EXHAUSTED` with a `RetryInfo` when any of `keys` must still wait.
    func check(_ keys: [ThrottleKey]) async throws {
        let now = clock.now()
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
            throw RPCError.resourceExhausted(
                "too many attempts; try again later",
                retryAfter: .milliseconds(Int64((longestWait * 1000).rounded(.up))))
        }
    }

    /// Counts one attempt against `key`; over the policy's limit the subject must wait before the next.
    func record(_ key: ThrottleKey, policy: ThrottlePolicy) async throws {
        let now = clock.now()
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
    func reset(_ key: ThrottleKey) async throws {
        try await pool.execute(
            "DELETE FROM throttle_state WHERE scope = \(key.scope.rawValue) AND subject_hash = \(key.subjectHash)")
    }
}

extension Duration {
    /// In seconds, as Foundation counts time.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
