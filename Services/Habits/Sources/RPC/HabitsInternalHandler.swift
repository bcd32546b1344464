internal import HabitFlowInternalCredential
internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit

/// `habitflow.habits.v1.HabitsInternal`: for other services (goals, social, account deletion, the gateway's export
/// under a caller of its own), never for calls the gateway forwards. ExportUser is in `+Export`.
struct HabitsInternalHandler: Habitflow_Habits_V1_HabitsInternal.Handler {
    let store: HabitsStore
    let clock: UserClock
    let weeklyScores: WeeklyScoreCache
    /// The public API's week views: a user's score of a week whose view was read under their current version costs
    /// no read (the dashboard asks for the caller's week view and, through the leaderboard, their score at once).
    let weekViews: WeekViewCache

    static let maximumHabitsPerAggregate = 100
    static let maximumAggregateDays = 4_000
    static let maximumUsersPerScoreCall = 101
    static let maximumHabitsPerLookup = 100
    static let maximumHabitsPerHold = 100
    /// A holder such as "goal:<uuid>" (the column's limit in `unit_holds`).
    static let maximumHolderLength = 100
    /// About 1 MB of request: well under the 4 MiB message limit, and one statement Postgres inserts in a blink.
    static let maximumEntriesPerImport = 10_000

    /// Defense in depth: the gateway never routes here, and a call it signs is refused should it try.
    func requireServiceCaller() throws {
        try CallerIdentity.requireServiceCaller(of: "HabitsInternal")
    }

    func aggregateEntries(
        request: Habitflow_Habits_V1_AggregateEntriesRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_AggregateEntriesResponse {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        let habitIDs = validator.optionalIDs(
            request.habitIds, field: "habit_ids", maximum: Self.maximumHabitsPerAggregate)
        let first = validator.requiredDate(request.startDate, isSet: request.hasStartDate, field: "start_date")
        let last = validator.requiredDate(request.endDate, isSet: request.hasEndDate, field: "end_date")
        validator.range(first, last, field: "end_date", maximumDays: Self.maximumAggregateDays)
        try validator.check()

        // The version first (one primary-key lookup; a new user is created, a deleted account refused), then the
        // data: a write between the two makes the answer newer than its version, never older, so a caller that
        // caches it under that version asks again after the write rather than keep stale figures.
        let version = try await store.userVersion(userID, now: clock.now).changeSequence
        if request.hasUnlessVersion, request.unlessVersion == version {
            return .with {
                $0.version = version
                $0.unchanged = true
            }
        }
        var response = Habitflow_Habits_V1_AggregateEntriesResponse()
        response.version = version
        if request.includeDetails {
            (response.habits, response.categories) = try await details(user: userID, habitIDs: habitIDs)
        } else {
            let existing = try await store.existingHabitIDs(user: userID, among: habitIDs)
            if let missing = habitIDs.first(where: { !existing.contains($0) }) {
                throw HabitsError.habitNotFound(missing)
            }
        }
        guard !habitIDs.isEmpty else { return response }
        let weeks =
            request.hasChangedSinceVersion
            ? try await store.changedWeekTotals(
                user: userID, habits: habitIDs, from: first, through: last, since: request.changedSinceVersion)
            : try await store.weekTotals(user: userID, habits: habitIDs, from: first, through: last)
        let totals = Dictionary(grouping: weeks, by: \.habitID)
        response.aggregates = habitIDs.flatMap { habitID in
            (totals[habitID] ?? []).sorted { $0.week < $1.week }.map { total in
                .with {
                    $0.habitID = habitID.lowercasedString
                    $0.week = total.week.proto
                    $0.weekStart = total.week.monday.proto
                    $0.entryCount = Int64(total.count)
                    $0.valueSum = total.valueSum.doubleValue
                }
            }
        }
        return response
    }

    func lookupHabits(
        request: Habitflow_Habits_V1_LookupHabitsRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_LookupHabitsResponse {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        let habitIDs = validator.optionalIDs(request.habitIds, field: "habit_ids", maximum: Self.maximumHabitsPerLookup)
        try validator.check()
        // A new user is created with the default categories (as any first call does); a deleted account is refused.
        _ = try await store.prepareUser(userID, now: clock.now)
        let (habits, categories) = try await details(user: userID, habitIDs: habitIDs)
        return .with {
            $0.habits = habits
            $0.categories = categories
        }
    }

    /// What LookupHabits answers, and AggregateEntries with `include_details`: the habits of `habitIDs` in that order
    /// (deleted ones included; NOT_FOUND names the first that is not the user's) and the user's live categories in
    /// display order.
    private func details(
        user userID: UUID, habitIDs: [UUID]
    ) async throws -> (habits: [Habitflow_Habits_V1_HabitSummary], categories: [Habitflow_Habits_V1_CategorySummary]) {
        let habits = try await store.habits(user: userID, ids: habitIDs)
        if let missing = zip(habitIDs, habits).first(where: { $0.1 == nil }) {
            throw HabitsError.habitNotFound(missing.0)
        }
        let categories = try await store.categories(of: userID)
        return (habits.compactMap { $0?.summary }, categories.map(\.summary))
    }

    func setUnitHolds(
        request: Habitflow_Habits_V1_SetUnitHoldsRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_SetUnitHoldsResponse {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        let holder = validator.holder(request.holder, field: "holder", maximumLength: Self.maximumHolderLength)
        let habitIDs = validator.optionalIDs(request.habitIds, field: "habit_ids", maximum: Self.maximumHabitsPerHold)
        // Compared with the habits' units as stored (trimmed, as CreateHabit and UpdateHabit store them); ignored when
        // the holder releases everything.
        let unit = request.habitIds.isEmpty
            ? "" : validator.name(request.unit, field: "unit", maximumLength: HabitRules.maximumUnitLength)
        try validator.check()
        // A new user is created (and has no habits: any id is NOT_FOUND); a deleted account is refused.
        _ = try await store.prepareUser(userID, now: clock.now)
        try await store.setUnitHolds(user: userID, holder: holder, habitIDs: habitIDs, unit: unit)
        return .init()
    }

    func getWeeklyScores(
        request: Habitflow_Habits_V1_GetWeeklyScoresRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_GetWeeklyScoresResponse {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userIDs = validator.ids(request.userIds, field: "user_ids", maximum: Self.maximumUsersPerScoreCall)
        let requested = request.hasWeek ? validator.week(request.week, field: "week") : nil
        try validator.check()

        // Users the service has not seen have no habits; their week is taken in UTC. Their versions come first: a
        // user whose score of the week is cached under the same version costs nothing more, and the others' data,
        // read after, is at least as new as the version it is stored under.
        let versions = try await store.versions(of: userIDs)
        let now = clock.now
        var weeks: [UUID: IsoWeek] = [:]
        var answers: [UUID: Habitflow_Habits_V1_UserWeeklyScore] = [:]
        for userID in userIDs {
            let week = requested ?? IsoWeek(containing: (versions[userID]?.zone ?? .utc).localDate(at: now))
            guard let version = versions[userID] else {
                weeks[userID] = week
                continue
            }
            if let cached = weeklyScores.answer(of: userID, for: WeeklyScoreKey(version: version, week: week)) {
                answers[userID] = cached
            } else if let view = weekViews.data(of: userID, week: week, version: version) {
                let score = Self.weeklyScore(
                    of: userID, in: week, tallies: view.tallies(in: week), categories: view.categories)
                answers[userID] = score
                weeklyScores.store(score, of: userID, for: WeeklyScoreKey(version: version, week: week))
            } else {
                weeks[userID] = week
            }
        }
        if let earliest = weeks.values.min(), let latest = weeks.values.max() {
            let toRead = Array(weeks.keys)
            // Three independent reads, each on a connection of its own: a leaderboard waits for the slowest, not the
            // sum.
            async let habitRows = store.habits(of: toRead, liveBetween: earliest, and: latest)
            let scoredWeeks = weeks
            async let completionRows = store.completions(in: scoredWeeks)
            async let categoryRows = store.liveCategories(of: toRead)
            let (habits, completions, categories) = try await (habitRows, completionRows, categoryRows)
            for (userID, week) in weeks {
                let score = Self.weeklyScore(
                    of: userID, in: week,
                    tallies: WeekTallies.tallies(
                        of: habits[userID] ?? [], in: week, completions: completions[userID] ?? [:]),
                    categories: categories[userID] ?? [])
                answers[userID] = score
                if let version = versions[userID] {
                    weeklyScores.store(score, of: userID, for: WeeklyScoreKey(version: version, week: week))
                }
            }
        }
        return .with { $0.scores = userIDs.compactMap { answers[$0] } }
    }

    private static func weeklyScore(
        of userID: UUID, in week: IsoWeek, tallies: [HabitWeekTally], categories: [CategoryRecord]
    ) -> Habitflow_Habits_V1_UserWeeklyScore {
        .with {
            $0.userID = userID.lowercasedString
            $0.week = week.proto
            $0.score = WeeklyScore(tallies).proto
            $0.habitCount = Int32(tallies.count)
            $0.categoryScores = CategoryWeekScore.scores(of: tallies, categories: categories.map { ($0.id, $0.name) })
                .map(\.proto)
        }
    }

    func purgeUser(
        request: Habitflow_Habits_V1_PurgeUserRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_PurgeUserResponse {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        try validator.check()
        let existed = try await store.pool.transaction { try await store.purgeUser($0, user: userID) }
        return .with { $0.existed = existed }
    }

    func importEntries(
        request: Habitflow_Habits_V1_ImportEntriesRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_ImportEntriesResponse {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        // The user's today decides which dates are in the future; a user the service does not know has no habits.
        let zone = validator.violations.isEmpty ? try await store.timeZones(of: [userID])[userID] : nil
        let entries = validator.importedEntries(
            request.entries, field: "entries", maximum: Self.maximumEntriesPerImport,
            today: clock.today(in: zone ?? .utc))
        try validator.check()
        // check() passed, so every entry parsed and there is at least one.
        guard zone != nil else { throw HabitsError.habitNotFound(entries[0].habitID) }
        let result = try await store.importEntries(user: userID, entries: entries, now: clock.now)
        return .with {
            $0.importedEntries = Int32(result.imported)
            $0.existingEntries = Int32(result.existing)
        }
    }
}
