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

    /// The version and week of the user's kept view, if any: what to ask ``HabitsStore/weekViewChanges`` since.
    func keptVersion(of userID: UUID) -> (version: UserVersion, week: IsoWeek)? {
        entries.withLock { $0[userID].map { ($0.version, $0.week) } }
    }

    /// The user's view of `week` on `today`, in its wire form (`Message.wireForm()`): the cached one while `version` and
    /// `week` match (rebuilt from the cached data when only the day moved on), the cached data brought up to `version`
    /// with `changes` when they were counted from its version in that week and nothing but entries changed, and
    /// otherwise built from what `read` returns; cached under `version`.
    ///
    /// - Important: `version` must have been read before `read` runs, so that the data is at least that new; `changes`
    ///   must have been read with `version`.
    func view(
        of userID: UUID, week: IsoWeek, today: LocalDate, version: UserVersion, changes: WeekViewChanges? = nil,
        read: () async throws -> WeekViewData
    ) async throws -> Habitflow_Habits_V1_WeekView {
        let cached = entries.withLock { $0[userID] }
        let data: WeekViewData
        if let cached, cached.version == version, cached.week == week {
            if cached.today == today { return cached.view }
            data = cached.data
        } else if let cached, let changes, changes.version == version, changes.week == week,
            let updated = changes.applied(to: cached.data, readAs: cached.version, in: cached.week)
        {
            data = updated
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

/// One answer per user, kept with the key it was read under (what was asked, with the user's version when the answer
/// is served as it is), and found again while a request comes with the same key: the version is read before the data,
/// so a kept answer is never older than its version. An answer that carries its own version instead (the week counts,
/// brought up to date rather than served as they are) keeps that rule itself. At most `capacity` users, the oldest
/// stored making room.
final class UserAnswerCache<Key: Hashable & Sendable, Answer: Sendable>: Sendable {
    private struct Entry: Sendable {
        var key: Key
        var answer: Answer
    }

    private let entries: Locked<BoundedMap<UUID, Entry>>

    init(capacity: Int) {
        entries = Locked(BoundedMap(capacity: capacity))
    }

    /// The user's answer if it was stored under `key`.
    func answer(of userID: UUID, for key: Key) -> Answer? {
        entries.withLock { entries in
            guard let entry = entries[userID], entry.key == key else { return nil }
            return entry.answer
        }
    }

    /// - Important: the version in `key` (or in `answer`) must have been read before the data `answer` was made from.
    func store(_ answer: Answer, of userID: UUID, for key: Key) {
        entries.withLock { $0.store(Entry(key: key, answer: answer), for: userID) }
    }
}

/// Users' weekly scores as `GetWeeklyScores` answers them, served again while the user's version is the one they were
/// read at: a leaderboard asks for the same 101 users over and over, and only those who wrote since cost a read.
///
/// A score of a named week depends on the user's data only (not on their today), which the version covers: every
/// write takes the user's next change-sequence value. One week per user, for at most 65,536 users (a few hundred
/// bytes each).
typealias WeeklyScoreCache = UserAnswerCache<WeeklyScoreKey, Habitflow_Habits_V1_UserWeeklyScore>

struct WeeklyScoreKey: Hashable, Sendable {
    var version: UserVersion
    var week: IsoWeek
}

extension UserAnswerCache where Key == WeeklyScoreKey {
    convenience init() { self.init(capacity: 65_536) }
}

/// The zone each recent caller had stored when the service last read it, so that a check-in can compute the user's
/// today without reading the zone first. Only a hint: ``HabitsStore/markDone(user:habit:entry:date:value:now:zoneName:)``
/// writes only while the stored zone is still the hinted one. At most 65,536 users (a few MB).
typealias UserZoneHints = UserHints<String>

extension UserHints where Hint == String {
    convenience init() { self.init(capacity: 65_536) }
}

/// Users' habit lists as `ListHabits` answered them (in their wire form), served again while the user's habit-list
/// version (``HabitsStore/habitListVersion(_:)``) is the one they were read at: a check-in, the usual write, leaves
/// the list and its version as they were, so the list is read again only after a habit changed. One answer (one
/// request: page, page size, deleted or not) per user, for at most 4,096 users (a few KB each with 15 habits).
typealias HabitListCache = UserAnswerCache<HabitListKey, Habitflow_Habits_V1_ListHabitsResponse>

struct HabitListKey: Hashable, Sendable {
    var version: Int64
    var includeDeleted: Bool
    var createdAfter: Int64
    var pageSize: Int
}

extension UserAnswerCache where Key == HabitListKey {
    convenience init() { self.init(capacity: 4_096) }
}

/// Users' entry counts per habit and week for their score history (``HabitsStore/weekCounts(user:from:through:changedSince:)``),
/// kept with the change-sequence value they are as of: the next score history of the same weeks reads only the
/// weeks whose entries changed since (a check-in every few seconds leaves the other eleven of the default twelve as
/// they were), so its cost no longer grows with the range. The value is read in the counting statement, so kept
/// counts are never older than it. One range per user, for at most 4,096 users (a few KB each with 15 habits).
typealias WeekCountCache = UserAnswerCache<WeekRange, WeekCounts>

struct WeekRange: Hashable, Sendable {
    var first: IsoWeek
    var last: IsoWeek
}

/// The habits users' score histories were scored with, kept under the user's habit-list version
/// (``HabitsStore/habitListVersion(_:)``), which the counting statement reads too
/// (``HabitsStore/weekCounts(user:from:through:changedSince:)``): a check-in leaves it, so a history after one is that
/// statement alone. One range per user, for at most 4,096 users (a few KB each with 15 habits).
typealias ScoredHabitsCache = UserAnswerCache<ScoredHabitsKey, [HabitRecord]>

struct ScoredHabitsKey: Hashable, Sendable {
    var version: Int64
    var weeks: WeekRange
}
