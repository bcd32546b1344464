public import Foundation
public import HabitFlowCalendar
internal import HabitFlowInternalCredential
internal import HabitFlowLocking

/// "Now" per test user: the service reads the time through a ``UserClock`` that looks up the user of the call being
/// served, so tests running in parallel on one host each put their own user on a week boundary or in a DST week.
/// Users without a time set see the real clock.
public final class TestClocks: Sendable {
    public init() {}

    private let times = Locked<[UUID: Date]>([:])

    public func set(_ instant: Date, for userID: UUID) { times.withLock { $0[userID] = instant } }

    public var clock: UserClock {
        UserClock { [self] in
            guard let userID = CallerIdentity.current?.userID else { return Date() }
            return times.withLock { $0[userID] } ?? Date()
        }
    }
}
