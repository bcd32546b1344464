internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import HabitFlowServiceAPI
internal import Synchronization

/// A user's live goals with their derived progress and status, as of one day, and what they were derived from.
struct GoalsSnapshot: Sendable {
    /// Goals' version of the user when it was read.
    var version: UserVersion
    var today: LocalDate
    /// Habits' data version the progress was derived from.
    var habitsVersion: Int64
    var goals: UserGoals
    var entries: EntryTotals
    var habits: [UUID: HabitInfo]
    var categories: [CategoryInfo]
    /// Progress and status of each goal (evaluations without their weeks, which only history needs).
    var progress: [UUID: (progress: GoalProgress, status: GoalStatus)]

    /// The goals in list order: by the user's category order (Uncategorized, or a category habits no longer has,
    /// last), then by creation.
    var orderedGoals: [GoalRecord] {
        let ranks = Dictionary(uniqueKeysWithValues: categories.map { ($0.id, $0.position) })
        return goals.goals.sorted {
            let left = $0.categoryID.flatMap { ranks[$0] } ?? Int.max
            let right = $1.categoryID.flatMap { ranks[$0] } ?? Int.max
            return (left, $0.createdSequence) < (right, $1.createdSequence)
        }
    }

    func links(of goalID: UUID) -> [GoalLinkRecord] { goals.links[goalID] ?? [] }

    /// What the snapshot was derived from: equal stamps, equal figures. `nil` for a snapshot that is never served
    /// again (more than 100 linked habits).
    var stamp: Stamp? {
        habitsVersion < 0 ? nil : Stamp(goals: version.changeSequence, habits: habitsVersion, today: today)
    }

    struct Stamp: Hashable, Sendable {
        var goals: Int64
        var habits: Int64
        var today: LocalDate
    }

    func evaluation(of goal: GoalRecord) -> GoalEvaluation {
        goal.evaluate(
            links: links(of: goal.id), assessments: goals.assessments[goal.id] ?? [], entries: entries,
            taskCompletions: goals.taskCompletions[goal.id] ?? [], today: today)
    }
}

/// Reads users' goals with progress: at most one call to the habits service per read, and none of the goals
/// tables while the user's goals version is unchanged.
///
/// A snapshot is served again while goals' version of the user (one primary-key lookup), the user's day and habits'
/// version (the one call to habits, answered `unchanged` from a primary-key lookup there) are all the ones it was
/// derived from: every figure comes out as a fresh derivation would, on every replica, with nothing to invalidate.
/// Dropping the cache changes no answer, only its cost.
final class GoalProgressReader: Sendable {
    static let defaultCapacity = 4_096

    let store: GoalsStore
    let habits: HabitsSource
    let clock: UserClock
    private let snapshots: Mutex<BoundedMap<UUID, GoalsSnapshot>>
    /// Per user, the list answers built from their current snapshot, in wire form.
    private let lists: Mutex<BoundedMap<UUID, CachedLists>>

    /// ListGoals answers of one snapshot, by request.
    private struct CachedLists: Sendable {
        static let maximumPerUser = 4
        var stamp: GoalsSnapshot.Stamp
        var answers: [String: Habitflow_Goals_V1_ListGoalsResponse]
    }

    init(store: GoalsStore, habits: HabitsSource, clock: UserClock, capacity: Int = defaultCapacity) {
        self.store = store
        self.habits = habits
        self.clock = clock
        snapshots = Mutex(BoundedMap(capacity: capacity))
        lists = Mutex(BoundedMap(capacity: capacity))
    }

    /// The answer to the list request `key` from `snapshot`: the one built earlier from the same snapshot (already
    /// encoded: the app's goals tab and the dashboard ask the same while nothing changes), or `build`'s, kept.
    func list(
        of userID: UUID, from snapshot: GoalsSnapshot, request key: String,
        build: () throws -> Habitflow_Goals_V1_ListGoalsResponse
    ) throws -> Habitflow_Goals_V1_ListGoalsResponse {
        guard let stamp = snapshot.stamp else { return try build() }
        let cached = lists.withLock { $0[userID] }
        if let cached, cached.stamp == stamp, let answer = cached.answers[key] { return answer }
        let answer = try build().wireForm()
        lists.withLock { lists in
            var entry = lists[userID].flatMap { $0.stamp == stamp ? $0 : nil } ?? CachedLists(stamp: stamp, answers: [:])
            if entry.answers.count >= CachedLists.maximumPerUser { entry.answers.removeAll() }
            entry.answers[key] = answer
            lists.store(entry, for: userID)
        }
        return answer
    }

    /// The user's goals with progress now.
    func snapshot(of userID: UUID, options: CallOptions) async throws -> GoalsSnapshot {
        let version = try await store.userVersion(userID, now: clock.now)
        let today = clock.today(in: version.zone)
        let cached = snapshots.withLock { $0[userID] }
        if let cached, cached.version == version, cached.today == today {
            // The same goals and day: habits answers `unchanged`, or only the weeks whose entries changed since.
            if case .totals(let changed, let habitDetails, let categories, let habitsVersion) = try await aggregate(
                for: cached.goals, user: userID, today: today, unlessVersion: cached.habitsVersion,
                changedSince: cached.habitsVersion, options: options)
            {
                var entries = cached.entries
                entries.update(with: changed)
                return remember(
                    derive(cached.goals, today: today, entries: entries, habits: habitDetails, categories: categories,
                        habitsVersion: habitsVersion), for: userID)
            }
            return cached
        }
        let goals = try await store.userGoals(user: userID, version: version)
        guard case .totals(let entries, let habitDetails, let categories, let habitsVersion) = try await aggregate(
            for: goals, user: userID, today: today, unlessVersion: nil, options: options)
        else { throw RPCError(.internal, "the habits service answered unchanged to a request without a version") }
        return remember(
            derive(goals, today: today, entries: entries, habits: habitDetails, categories: categories,
                habitsVersion: habitsVersion), for: userID)
    }

    private func remember(_ snapshot: GoalsSnapshot, for userID: UUID) -> GoalsSnapshot {
        snapshots.withLock { $0.store(snapshot, for: userID) }
        return snapshot
    }

    private func derive(
        _ goals: UserGoals, today: LocalDate, entries: EntryTotals, habits: [UUID: HabitInfo],
        categories: [CategoryInfo], habitsVersion: Int64
    ) -> GoalsSnapshot {
        var snapshot = GoalsSnapshot(
            version: goals.version, today: today, habitsVersion: habitsVersion, goals: goals, entries: entries,
            habits: habits, categories: categories, progress: [:])
        for goal in goals.goals {
            let evaluation = snapshot.evaluation(of: goal)
            snapshot.progress[goal.id] = (evaluation.progress, evaluation.status)
        }
        return snapshot
    }

    /// One call to habits for every habit the goals link, over the weeks from the earliest goal's first through the
    /// current one (at most 4,000 days back: goals older than that count their last 4,000 days). More than 100
    /// linked habits take one call per 100, each answered in full (such a snapshot gets version -1, which habits
    /// never has, so the next read asks again in full).
    private func aggregate(
        for goals: UserGoals, user userID: UUID, today: LocalDate, unlessVersion: Int64?, changedSince: Int64? = nil,
        options: CallOptions
    ) async throws -> HabitsSource.Aggregate {
        // Each linked habit once, in the order of the goals and their links: the same request for the same goals
        // (`uuidString`, which formats through printf, made sorting by it a quarter of the service's CPU).
        var seen: Set<UUID> = []
        let habitIDs = goals.goals.flatMap { goals.links[$0.id] ?? [] }.map(\.habitID).filter { seen.insert($0).inserted }
        let last = IsoWeek(containing: today).sunday
        let earliest = goals.goals.map(\.startDate).min() ?? last
        let first = max(earliest, last.adding(days: -(HabitsSource.maximumDaysPerCall - 1)))
        guard habitIDs.count > HabitsSource.maximumHabitsPerCall else {
            return try await habits.aggregate(
                user: userID, habits: habitIDs, from: first, through: last, unlessVersion: unlessVersion,
                changedSince: changedSince, options: options)
        }
        var entries = EntryTotals()
        var details: [UUID: HabitInfo] = [:]
        var categories: [CategoryInfo] = []
        for start in stride(from: 0, to: habitIDs.count, by: HabitsSource.maximumHabitsPerCall) {
            let chunk = Array(habitIDs[start..<min(start + HabitsSource.maximumHabitsPerCall, habitIDs.count)])
            guard case .totals(let part, let partDetails, let partCategories, _) = try await habits.aggregate(
                user: userID, habits: chunk, from: first, through: last, unlessVersion: nil, options: options)
            else { continue }
            entries.update(with: part)
            details.merge(partDetails) { $1 }
            categories = partCategories
        }
        return .totals(entries, habits: details, categories: categories, version: -1)
    }
}
