internal import Foundation
internal import HabitFlowCrypto

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
