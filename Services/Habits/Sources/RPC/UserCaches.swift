internal import HabitFlowCalendar
internal import HabitFlowServiceAPI
public import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import SwiftProtobuf
internal import HabitFlowLocking

/// Week views per user, served again while the user's version (stored zone and change-sequence value) is the one
/// they were read at.
///
/// Every write of the service takes the user's next change-sequence value in its own transaction, and a request
/// reads the version before the data, so cached data is never older than its version: the primary-key lookup each
/// request makes anyway tells whether it is current, on every replica, without invalidation messages. One week per
/// user, for at most `capacity` users (about 10 KB each with 15 habits: some 40 MB at the default).
public final class WeekViewCache: Sendable {
    public static let defaultCapacity = 4_096

    struct Entry: Sendable {
        var version: UserVersion
        var week: IsoWeek
        var data: WeekViewData
        /// The view as built on `today` (the same data and day give the same view), in its wire form.
        var today: LocalDate
        var view: Habitflow_Habits_V1_WeekView
    }

    private let entries: Locked<BoundedMap<UUID, Entry>>

    public init(capacity: Int = defaultCapacity) {
        entries = Locked(BoundedMap(capacity: capacity))
    }

    public var capacity: Int { entries.withLock { $0.capacity } }

    /// How many users have a view cached.
    public var count: Int { entries.withLock { $0.count } }

    public func contains(user userID: UUID) -> Bool { entries.withLock { $0[userID] != nil } }

    /// The user's view of `week` on `today`, in its wire form (`Message.wireForm()`): the cached one while `version` and
    /// `week` match (rebuilt from the cached data when only the day moved on), otherwise built from what `read`
    /// returns and cached under `version`.
    ///
    /// - Important: `version` must have been read before `read` runs, so that the data is at least that new.
    func view(
        of userID: UUID, week: IsoWeek, today: LocalDate, version: UserVersion,
        read: () async throws -> WeekViewData
    ) async throws -> Habitflow_Habits_V1_WeekView {
        let cached = entries.withLock { $0[userID] }
        let data: WeekViewData
        if let cached, cached.version == version, cached.week == week {
            if cached.today == today { return cached.view }
            data = cached.data
        } else {
            data = try await read()
        }
        let view = try WeekViewBuilder(week: week, today: today, data: data).view.wireForm()
        let entry = Entry(version: version, week: week, data: data, today: today, view: view)
        entries.withLock { $0.store(entry, for: userID) }
        return view
    }

    /// The data of the user's view of `week` if it was read under `version` (what the weekly score of that week is
    /// made from, too).
    func data(of userID: UUID, week: IsoWeek, version: UserVersion) -> WeekViewData? {
        entries.withLock { entries in
            guard let entry = entries[userID], entry.version == version, entry.week == week else { return nil }
            return entry.data
        }
    }
}

/// Users' weekly scores as `GetWeeklyScores` answers them, served again while the user's version is the one they were
/// read at: a leaderboard asks for the same 101 users over and over, and only those who wrote since cost a read.
///
/// A score of a named week depends on the user's data only (not on their today), which the version covers: every
/// write takes the user's next change-sequence value. One week per user, for at most `capacity` users (a few hundred
/// bytes each).
final class WeeklyScoreCache: Sendable {
    static let defaultCapacity = 65_536

    private struct Entry: Sendable {
        var version: UserVersion
        var week: IsoWeek
        var score: Habitflow_Habits_V1_UserWeeklyScore
    }

    private let entries: Locked<BoundedMap<UUID, Entry>>

    init(capacity: Int = defaultCapacity) {
        entries = Locked(BoundedMap(capacity: capacity))
    }

    /// The user's score of `week` if it was stored under `version`.
    func score(of userID: UUID, week: IsoWeek, version: UserVersion) -> Habitflow_Habits_V1_UserWeeklyScore? {
        entries.withLock { entries in
            guard let entry = entries[userID], entry.version == version, entry.week == week else { return nil }
            return entry.score
        }
    }

    /// - Important: `version` must have been read before the data `score` was made from.
    func store(_ score: Habitflow_Habits_V1_UserWeeklyScore, of userID: UUID, week: IsoWeek, version: UserVersion) {
        entries.withLock { $0.store(Entry(version: version, week: week, score: score), for: userID) }
    }
}

/// The zone each recent caller had stored when the service last read it, so that a check-in can compute the user's
/// today without reading the zone first. Only a hint: ``HabitsStore/markDone(user:habit:entry:date:value:now:zoneName:)``
/// writes only while the stored zone is still the hinted one. At most `capacity` users (a few MB at the default).
final class UserZoneHints: Sendable {
    static let defaultCapacity = 65_536

    private let zoneNames: Locked<BoundedMap<UUID, String>>

    init(capacity: Int = defaultCapacity) {
        zoneNames = Locked(BoundedMap(capacity: capacity))
    }

    func zoneName(of userID: UUID) -> String? { zoneNames.withLock { $0[userID] } }

    func remember(_ zoneName: String, for userID: UUID) {
        zoneNames.withLock { names in
            if names[userID] != zoneName { names.store(zoneName, for: userID) }
        }
    }
}
