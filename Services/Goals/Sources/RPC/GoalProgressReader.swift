internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import HabitFlowServiceAPI
internal import HabitFlowLocking

/// A user's live goals with their derived progress and status, as of one day, and what they were derived from.
struct GoalsSnapshot: Sendable {
    /// Goals' version of the user when it was read.
    var version: UserVersion
    var today: LocalDate
    /// Habits' data version the progress was derived from.
    var habitsVersion: Int64
    /// The user's goals and the goals shared with them (their partner's, after their own).
    var goals: UserGoals
    /// The user's own linked habits' totals, as habits answered them.
    var ownEntries: EntryTotals
    /// Every linked habit's totals: the user's and, for shared goals, the other partner's (habit ids are unique, so
    /// the two never collide and both partners' check-ins count).
    var entries: EntryTotals
    /// The other users whose habits the goals link (the partner), with their totals and habits' version of them.
    var partners: [UUID: PartnerTotals]
    /// The zone of each creator of a goal shared with the user: a shared goal's weeks are its creator's.
    var ownerZones: [UUID: UserTimeZone]
    /// Each such creator's today when the snapshot was derived.
    var ownerTodays: [UUID: LocalDate]
    /// Details of every linked habit, the partner's included.
    var habits: [UUID: HabitInfo]
    /// Details of the user's own habits, as habits answered them.
    var ownHabits: [UUID: HabitInfo]
    var categories: [CategoryInfo]
    /// Progress and status of each goal (evaluations without their weeks, which only history needs).
    var progress: [UUID: (progress: GoalProgress, status: GoalStatus)]

    /// The goals in list order: by the user's category order (Uncategorized, or a category habits no longer has,
    /// last), then by creation.
    /// Goals shared with the user (their category is the creator's) come after the user's own, in the order they
    /// were created.
    var orderedGoals: [GoalRecord] {
        let ranks = Dictionary(uniqueKeysWithValues: categories.map { ($0.id, $0.position) })
        let own = goals.goals.filter { ownerZones[$0.ownerID] == nil }
        let shared = goals.goals.filter { ownerZones[$0.ownerID] != nil }
        return own.sorted {
            let left = $0.categoryID.flatMap { ranks[$0] } ?? Int.max
            let right = $1.categoryID.flatMap { ranks[$0] } ?? Int.max
            return (left, $0.createdSequence) < (right, $1.createdSequence)
        } + shared
    }

    func links(of goalID: UUID) -> [GoalLinkRecord] { goals.links[goalID] ?? [] }

    /// What the snapshot was derived from: equal stamps, equal figures. `nil` for a snapshot that is never served
    /// again (more than 100 linked habits).
    var stamp: Stamp? {
        habitsVersion < 0
            ? nil
            : Stamp(
                goals: version.changeSequence, habits: habitsVersion, today: today,
                partners: partners.mapValues(\.version), ownerTodays: ownerTodays)
    }

    struct Stamp: Hashable, Sendable {
        var goals: Int64
        var habits: Int64
        var today: LocalDate
        var partners: [UUID: Int64]
        var ownerTodays: [UUID: LocalDate]
    }

    /// A shared goal is evaluated on its creator's today (its weeks are theirs).
    func evaluation(of goal: GoalRecord) -> GoalEvaluation {
        goal.evaluate(
            links: links(of: goal.id), assessments: goals.assessments[goal.id] ?? [], entries: entries,
            taskCompletions: goals.taskCompletions[goal.id] ?? [], today: ownerTodays[goal.ownerID] ?? today)
    }
}

/// Another user's linked habits' totals (a partner's, for shared goals) and what they were asked for.
struct PartnerTotals: Sendable {
    var habitIDs: [UUID]
    var first: LocalDate
    var last: LocalDate
    var entries: EntryTotals
    var habits: [UUID: HabitInfo]
    /// Habits' version of that user.
    var version: Int64
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
    private let snapshots: Locked<BoundedMap<UUID, GoalsSnapshot>>
    /// Per user, the list answers built from their current snapshot, in wire form.
    private let lists: Locked<BoundedMap<UUID, CachedLists>>
    /// Per user, goals' version at which they had no rating (read after the version).
    private let ratinglessVersions: Locked<BoundedMap<UUID, UserVersion>>

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
        snapshots = Locked(BoundedMap(capacity: capacity))
        lists = Locked(BoundedMap(capacity: capacity))
        ratinglessVersions = Locked(BoundedMap(capacity: capacity))
    }

    /// Whether the user had no rating at `version` (goals' version of them, read now): reviews are written only
    /// under the user's next version, so none has been added since.
    func hasNoRatings(_ userID: UUID, at version: UserVersion) -> Bool {
        ratinglessVersions.withLock { $0[userID] == version }
    }

    /// Remembers that the user had no rating, read after goals' version of them was `version`.
    func rememberNoRatings(_ userID: UUID, at version: UserVersion) {
        ratinglessVersions.withLock { $0.store(version, for: userID) }
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

    /// The user's goals with progress now (their own and those shared with them).
    func snapshot(of userID: UUID, options: CallOptions) async throws -> GoalsSnapshot {
        let version = try await store.userVersion(userID, now: clock.now)
        let today = clock.today(in: version.zone)
        let cached = snapshots.withLock { $0[userID] }
        if let cached, cached.version == version, cached.today == today,
            cached.ownerTodays == cached.ownerZones.mapValues({ clock.today(in: $0) })
        {
            // No goals, own or shared: nothing habits could answer changes a figure.
            if cached.goals.goals.isEmpty { return cached }
            // The same goals and day: habits answers `unchanged`, or only the weeks whose entries changed since.
            let own = try await aggregate(
                for: cached.goals, user: userID, today: today, ownerTodays: cached.ownerTodays,
                unlessVersion: cached.habitsVersion, changedSince: cached.habitsVersion, options: options)
            let partners = try await partnerTotals(
                for: cached.goals, user: userID, today: today, ownerTodays: cached.ownerTodays,
                cached: cached.partners, options: options)
            if case .totals(let changed, let habitDetails, let categories, let habitsVersion) = own {
                var entries = cached.ownEntries
                entries.update(with: changed)
                return remember(
                    derive(cached.goals, today: today, ownEntries: entries, habits: habitDetails,
                        categories: categories, habitsVersion: habitsVersion, partners: partners,
                        ownerZones: cached.ownerZones), for: userID)
            }
            if partners.mapValues(\.version) != cached.partners.mapValues(\.version) {
                return remember(
                    derive(cached.goals, today: today, ownEntries: cached.ownEntries, habits: cached.ownHabits,
                        categories: cached.categories, habitsVersion: cached.habitsVersion, partners: partners,
                        ownerZones: cached.ownerZones), for: userID)
            }
            return cached
        }
        var goals = try await store.userGoals(user: userID, version: version)
        let shared = try await store.goalsShared(with: userID)
        goals.goals += shared.goals
        goals.links.merge(shared.links) { $1 }
        goals.assessments.merge(shared.assessments) { $1 }
        goals.taskCompletions.merge(shared.taskCompletions) { $1 }
        let ownerTodays = shared.ownerZones.mapValues { clock.today(in: $0) }
        if goals.goals.isEmpty {
            // Most accounts have no goals: their snapshot needs no call to habits (its habits and categories only
            // describe linked habits and order goals), and is served again until goals' version or the day moves.
            return remember(
                derive(goals, today: today, ownEntries: EntryTotals(), habits: [:], categories: [],
                    habitsVersion: 0, partners: [:], ownerZones: [:]), for: userID)
        }
        guard case .totals(let entries, let habitDetails, let categories, let habitsVersion) = try await aggregate(
            for: goals, user: userID, today: today, ownerTodays: ownerTodays, unlessVersion: nil, options: options)
        else { throw RPCError(.internal, "the habits service answered unchanged to a request without a version") }
        let partners = try await partnerTotals(
            for: goals, user: userID, today: today, ownerTodays: ownerTodays, cached: cached?.partners ?? [:],
            options: options)
        return remember(
            derive(goals, today: today, ownEntries: entries, habits: habitDetails, categories: categories,
                habitsVersion: habitsVersion, partners: partners, ownerZones: shared.ownerZones), for: userID)
    }

    private func remember(_ snapshot: GoalsSnapshot, for userID: UUID) -> GoalsSnapshot {
        snapshots.withLock { $0.store(snapshot, for: userID) }
        return snapshot
    }

    private func derive(
        _ goals: UserGoals, today: LocalDate, ownEntries: EntryTotals, habits: [UUID: HabitInfo],
        categories: [CategoryInfo], habitsVersion: Int64, partners: [UUID: PartnerTotals],
        ownerZones: [UUID: UserTimeZone]
    ) -> GoalsSnapshot {
        var entries = ownEntries
        var allHabits = habits
        for partner in partners.values {
            entries.update(with: partner.entries)
            allHabits.merge(partner.habits) { own, _ in own }
        }
        var snapshot = GoalsSnapshot(
            version: goals.version, today: today, habitsVersion: habitsVersion, goals: goals, ownEntries: ownEntries,
            entries: entries, partners: partners, ownerZones: ownerZones,
            ownerTodays: ownerZones.mapValues { clock.today(in: $0) }, habits: allHabits, ownHabits: habits,
            categories: categories,
            progress: [:])
        for goal in goals.goals {
            let evaluation = snapshot.evaluation(of: goal)
            snapshot.progress[goal.id] = (evaluation.progress, evaluation.status)
        }
        return snapshot
    }

    /// The weeks a read asks habits for: from the earliest goal's first (at most 4,000 days back) through the
    /// current week (the latest of the user's and the shared goals' creators').
    private func range(for goals: UserGoals, today: LocalDate, ownerTodays: [UUID: LocalDate] = [:])
        -> (first: LocalDate, last: LocalDate)
    {
        let last = IsoWeek(containing: max(today, ownerTodays.values.max() ?? today)).sunday
        let earliest = goals.goals.map(\.startDate).min() ?? last
        return (max(earliest, last.adding(days: -(HabitsSource.maximumDaysPerCall - 1))), last)
    }

    /// Shared goals link the other partner's habits too: one `AggregateEntries` call per such user (the partner),
    /// only when they have links, with `unless_version` while the habits and weeks asked are the ones cached, so a
    /// partner's check-in is seen at once (their habits version moved).
    private func partnerTotals(
        for goals: UserGoals, user userID: UUID, today: LocalDate, ownerTodays: [UUID: LocalDate],
        cached: [UUID: PartnerTotals], options: CallOptions
    ) async throws -> [UUID: PartnerTotals] {
        var habitsByUser: [UUID: [UUID]] = [:]
        var seen: Set<UUID> = []
        for goal in goals.goals {
            for link in goals.links[goal.id] ?? []
            where link.habitUserID != userID && seen.insert(link.habitID).inserted {
                habitsByUser[link.habitUserID, default: []].append(link.habitID)
            }
        }
        guard !habitsByUser.isEmpty else { return [:] }
        let (first, last) = range(for: goals, today: today, ownerTodays: ownerTodays)
        var totals: [UUID: PartnerTotals] = [:]
        for (other, habitIDs) in habitsByUser {
            let previous = cached[other].flatMap {
                $0.habitIDs == habitIDs && $0.first == first && $0.last == last ? $0 : nil
            }
            switch try await habits.aggregate(
                user: other, habits: habitIDs, from: first, through: last, unlessVersion: previous?.version,
                options: options)
            {
            case .unchanged:
                totals[other] = previous
            case .totals(let entries, let details, _, let version):
                totals[other] = PartnerTotals(
                    habitIDs: habitIDs, first: first, last: last, entries: entries, habits: details, version: version)
            }
        }
        return totals
    }

    /// One call to habits for every habit the goals link, over the weeks from the earliest goal's first through the
    /// current one (at most 4,000 days back: goals older than that count their last 4,000 days). More than 100
    /// linked habits take one call per 100, each answered in full (such a snapshot gets version -1, which habits
    /// never has, so the next read asks again in full).
    private func aggregate(
        for goals: UserGoals, user userID: UUID, today: LocalDate, ownerTodays: [UUID: LocalDate],
        unlessVersion: Int64?, changedSince: Int64? = nil, options: CallOptions
    ) async throws -> HabitsSource.Aggregate {
        // Each linked habit once, in the order of the goals and their links: the same request for the same goals
        // (`uuidString`, which formats through printf, made sorting by it a quarter of the service's CPU).
        // Only the user's own habits: a partner's are asked for by `partnerTotals`.
        var seen: Set<UUID> = []
        let habitIDs = goals.goals.flatMap { goals.links[$0.id] ?? [] }.filter { $0.habitUserID == userID }
            .map(\.habitID).filter { seen.insert($0).inserted }
        let (first, last) = range(for: goals, today: today, ownerTodays: ownerTodays)
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
