public import Foundation
internal import HabitFlowLocking

/// What a service last learned about each recent user, kept to start the next request's work before reading it again
/// (a zone to compute the user's today with, the members of their last leaderboard). Only a hint: the request still
/// reads the truth, and uses what it started only where the two agree. At most `capacity` users, the oldest stored
/// making room.
public final class UserHints<Hint: Sendable>: Sendable {
    private let hints: Locked<BoundedMap<UUID, Hint>>

    public init(capacity: Int) {
        hints = Locked(BoundedMap(capacity: capacity))
    }

    public func hint(for userID: UUID) -> Hint? { hints.withLock { $0[userID] } }

    public func remember(_ hint: Hint, for userID: UUID) {
        hints.withLock { $0.store(hint, for: userID) }
    }
}
