public import Foundation

/// Where the auth service reads the time. Every expiry (tokens, sessions, reset links, throttling, key rotation) is
/// computed from it and written to Postgres as a bound value, never from the database's `now()`, so tests can move
/// time forward.
public protocol AuthClock: Sendable {
    func now() -> Date
}

/// The wall clock.
public struct SystemClock: AuthClock {
    public init() {}
    public func now() -> Date { Date() }
}
