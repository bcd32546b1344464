internal import HabitFlowInternalCredential
internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// `habitflow.habits.v1.HabitsService`: the public API, always on behalf of the user the gateway authenticated.
struct HabitsServiceHandler: Habitflow_Habits_V1_HabitsService.Handler {
    let store: HabitsStore
    let clock: UserClock
    let weekViews: WeekViewCache
    let habitLists: HabitListCache
    let scoreHistoryCounts: WeekCountCache
    let scoreHistoryHabits: ScoredHabitsCache
    let zoneHints: UserZoneHints

    static let habitPageSizes = PageSizeRule(defaultSize: 50, maximum: 200)
    static let entryPageSizes = PageSizeRule(defaultSize: 500, maximum: 1000)
    static let changePageSizes = PageSizeRule(defaultSize: 500, maximum: 1000)
    static let maximumHistoryWeeks = 530
    static let defaultHistoryWeeks = 12

    /// The calling user, known to the service from here on, with their time zone.
    private func caller() async throws -> (id: UUID, zone: UserTimeZone) {
        let userID = try CallerIdentity.requireUser()
        return (userID, try await store.prepareUser(userID, now: clock.now))
    }

    // MARK: - Categories

    func listCategories(
        request: Habitflow_Habits_V1_ListCategoriesRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_ListCategoriesResponse {
        let userID = try CallerIdentity.requireUser()
        // One statement for a user the service knows; a new or deleted account is prepared (or refused) first.
        let categories: [CategoryRecord]
        if let known = try await store.categoriesOfKnownUser(userID) {
            categories = known
        } else {
            categories = try await store.categories(of: try await caller().id)
        }
        return .with { $0.categories = categories.map(\.proto) }
    }

    func createCategory(
        request: Habitflow_Habits_V1_CreateCategoryRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Category {
        var validator = RequestValidator()
        let id = validator.clientID(request.categoryID, field: "category_id")
        let name = validator.name(request.name, field: "name", maximumLength: HabitRules.maximumCategoryNameLength)
        try validator.check()
        let user = try await caller()
        return try await store.createCategory(user: user.id, id: id, name: name, now: clock.now).proto
    }

    func renameCategory(
        request: Habitflow_Habits_V1_RenameCategoryRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Category {
        var validator = RequestValidator()
        let id = validator.id(request.categoryID, field: "category_id")
        let name = validator.name(request.name, field: "name", maximumLength: HabitRules.maximumCategoryNameLength)
        try validator.check()
        let user = try await caller()
        return try await store.renameCategory(user: user.id, id: id, name: name, now: clock.now).proto
    }

    func reorderCategories(
        request: Habitflow_Habits_V1_ReorderCategoriesRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_ListCategoriesResponse {
        var validator = RequestValidator()
        let ids = validator.ids(request.categoryIds, field: "category_ids", maximum: HabitRules.maximumCategories)
        try validator.check()
        let user = try await caller()
        let categories = try await store.reorderCategories(user: user.id, ids: ids, now: clock.now)
        return .with { $0.categories = categories.map(\.proto) }
    }

    func deleteCategory(
        request: Habitflow_Habits_V1_DeleteCategoryRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Category {
        var validator = RequestValidator()
        let id = validator.id(request.categoryID, field: "category_id")
        try validator.check()
        let user = try await caller()
        return try await store.deleteCategory(user: user.id, id: id, now: clock.now).proto
    }

    // MARK: - Habits

    func createHabit(
        request: Habitflow_Habits_V1_CreateHabitRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Habit {
        var validator = RequestValidator()
        let id = validator.clientID(request.habitID, field: "habit_id")
        let name = validator.name(request.name, field: "name", maximumLength: HabitRules.maximumHabitNameLength)
        let categoryID = validator.optionalID(request.categoryID, field: "category_id")
        let target = request.hasWeeklyTarget
            ? validator.weeklyTarget(request.weeklyTarget, field: "weekly_target") : HabitRules.defaultWeeklyTarget
        let unit = validator.unit(request.unit, field: "unit")
        try validator.check()
        let user = try await caller()
        return try await store.createHabit(
            user: user.id, id: id, name: name, categoryID: categoryID, weeklyTarget: target, unit: unit,
            today: clock.today(in: user.zone), now: clock.now
        ).proto
    }

    func getHabit(
        request: Habitflow_Habits_V1_GetHabitRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Habit {
        var validator = RequestValidator()
        let id = validator.id(request.habitID, field: "habit_id")
        try validator.check()
        // A habit found proves the user is known, so the user is prepared (created, or refused as deleted) only when
        // there is none: one round trip for the common case.
        let userID = try CallerIdentity.requireUser()
        if let habit = try await store.habit(user: userID, id: id) { return habit.proto }
        _ = try await caller()
        throw HabitsError.habitNotFound(id)
    }

    func listHabits(
        request: Habitflow_Habits_V1_ListHabitsRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_ListHabitsResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.habitPageSizes)
        let kind = request.showDeleted ? "habits+deleted" : "habits"
        var createdAfter: Int64 = 0
        if let token = validator.pageToken(request.pageToken, list: kind, fieldCount: 1) {
            if let sequence = Int64(token[0]) {
                createdAfter = sequence
            } else {
                validator.reject("page_token", "is not a token this list returned")
            }
        }
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        // For a user the service knows, one primary-key lookup with one index step: the cached answer serves until a
        // habit changes. A new or deleted account is prepared (or refused) first.
        guard let version = try await store.habitListVersion(userID) else {
            let habits = try await store.habits(
                user: try await caller().id, includeDeleted: request.showDeleted, createdAfter: createdAfter,
                limit: pageSize + 1)
            return Self.page(of: habits, size: pageSize, list: kind)
        }
        let key = HabitListKey(
            version: version, includeDeleted: request.showDeleted, createdAfter: createdAfter, pageSize: pageSize)
        if let cached = habitLists.answer(of: userID, for: key) { return cached }
        let habits = try await store.habits(
            user: userID, includeDeleted: request.showDeleted, createdAfter: createdAfter, limit: pageSize + 1)
        let answer = try Self.page(of: habits, size: pageSize, list: kind).wireForm()
        habitLists.store(answer, of: userID, for: key)
        return answer
    }

    /// A page of `habits` (read with one more than `size`, to tell whether another page follows).
    private static func page(
        of habits: [HabitRecord], size: Int, list: String
    ) -> Habitflow_Habits_V1_ListHabitsResponse {
        .with {
            let page = habits.prefix(size)
            $0.habits = page.map(\.proto)
            if habits.count > size, let last = page.last {
                $0.nextPageToken = PageToken.encode(list: list, [String(last.createdSequence)])
            }
        }
    }

    func updateHabit(
        request: Habitflow_Habits_V1_UpdateHabitRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Habit {
        var validator = RequestValidator()
        let habit = request.habit
        let id = validator.id(habit.id, field: "habit.id")
        // No mask: every updatable field the request sets (AIP-134).
        var paths = request.updateMask.paths
        if !request.hasUpdateMask {
            if !habit.name.isEmpty { paths.append("name") }
            if !habit.categoryID.isEmpty { paths.append("category_id") }
            if habit.weeklyTarget != 0 { paths.append("weekly_target") }
            if !habit.unit.isEmpty { paths.append("unit") }
        }
        var changes = HabitChanges()
        for path in paths {
            switch path {
            case "name":
                changes.name = validator.name(
                    habit.name, field: "habit.name", maximumLength: HabitRules.maximumHabitNameLength)
            case "category_id":
                changes.categoryID = .some(validator.optionalID(habit.categoryID, field: "habit.category_id"))
            case "weekly_target":
                changes.weeklyTarget = validator.weeklyTarget(habit.weeklyTarget, field: "habit.weekly_target")
            case "unit":
                changes.unit = .some(validator.unit(habit.unit, field: "habit.unit"))
            default:
                validator.reject("update_mask", "cannot update \"\(path)\"; updatable: name, category_id, weekly_target, unit")
            }
        }
        if paths.isEmpty { validator.reject("update_mask", "names no field to update") }
        try validator.check()
        let user = try await caller()
        return try await store.updateHabit(
            user: user.id, id: id, changes: changes, today: clock.today(in: user.zone), now: clock.now
        ).proto
    }

    func deleteHabit(
        request: Habitflow_Habits_V1_DeleteHabitRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Habit {
        var validator = RequestValidator()
        let id = validator.id(request.habitID, field: "habit_id")
        try validator.check()
        let user = try await caller()
        return try await store.deleteHabit(user: user.id, id: id, today: clock.today(in: user.zone), now: clock.now).proto
    }

    // MARK: - Entries

    func markHabitDone(
        request: Habitflow_Habits_V1_MarkHabitDoneRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_Entry {
        var validator = RequestValidator()
        let habitID = validator.id(request.habitID, field: "habit_id")
        let entryID = validator.clientID(request.entryID, field: "entry_id")
        let date = request.hasDate ? validator.date(request.date, field: "date") : nil
        let value = request.hasValue ? validator.entryValue(request.value, field: "value") : 1
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        let now = clock.now
        return try await writeOnUsersDay(userID, date: date, now: now) { day, zoneName in
            try await store.markDone(
                user: userID, habit: habitID, entry: entryID, date: day, value: value, now: now, zoneName: zoneName)
        }.proto
    }

    func markHabitNotDone(
        request: Habitflow_Habits_V1_MarkHabitNotDoneRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_MarkHabitNotDoneResponse {
        var validator = RequestValidator()
        let habitID = validator.id(request.habitID, field: "habit_id")
        let date = request.hasDate ? validator.date(request.date, field: "date") : nil
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        let now = clock.now
        let removed = try await writeOnUsersDay(userID, date: date, now: now) { day, zoneName in
            try await store.markNotDone(user: userID, habit: habitID, date: day, now: now, zoneName: zoneName)
        }
        return .with { $0.removedEntries = Int32(removed) }
    }

    /// Runs `write` for `date` (today when `nil`, in the user's zone). With the zone remembered from an earlier call a
    /// check-in or its removal is one statement, which writes only while the stored zone is still that one;
    /// otherwise the day is worked out again in the zone stored now.
    private func writeOnUsersDay<Value: Sendable>(
        _ userID: UUID, date: LocalDate?, now: Date,
        _ write: (_ day: LocalDate, _ zoneName: String) async throws -> HabitsStore.DayWriteOutcome<Value>
    ) async throws -> Value {
        var zone: (name: String, isHint: Bool)
        if let hint = zoneHints.hint(for: userID) {
            zone = (hint, true)
        } else {
            zone = (try await storedZoneName(userID, now: now), false)
        }
        for _ in 0..<Self.dayWriteAttempts {
            let userZone = UserTimeZone.stored(zone.name)
            let today = userZone.localDate(at: now)
            if zone.isHint, let date, date > today {
                // A date is refused on the stored zone only, never on a hint.
                zone = (try await storedZoneName(userID, now: now), false)
                continue
            }
            switch try await write(try day(date, today: today, zone: userZone), zone.name) {
            case .written(let value):
                return value
            case .zoneChanged(let storedZoneName):
                zoneHints.remember(storedZoneName, for: userID)
                zone = (storedZoneName, false)
            }
        }
        throw RPCError(.aborted, "the user's time zone kept changing during the write; retry it")
    }

    /// A check-in (or its removal) reads the zone again when it changed under it; this many tries before giving up
    /// with ABORTED.
    static let dayWriteAttempts = 3

    /// The user's stored zone name (the user is created when new), remembered for the next check-in.
    private func storedZoneName(_ userID: UUID, now: Date) async throws -> String {
        let zoneName = try await store.userVersion(userID, now: now).zoneName
        zoneHints.remember(zoneName, for: userID)
        return zoneName
    }

    /// The day a check-in is for: the given one, which must not be after the user's today, or today.
    private func day(_ date: LocalDate?, today: LocalDate, zone: UserTimeZone) throws -> LocalDate {
        guard let date else { return today }
        guard date <= today else {
            throw RPCError.invalidArgument(
                field: "date", "must not be after the user's today (\(today) in \(zone.name)), got \(date)")
        }
        return date
    }

    func listEntries(
        request: Habitflow_Habits_V1_ListEntriesRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_ListEntriesResponse {
        var validator = RequestValidator()
        let habitID = validator.optionalID(request.habitID, field: "habit_id")
        let first = validator.requiredDate(request.startDate, isSet: request.hasStartDate, field: "start_date")
        let last = validator.requiredDate(request.endDate, isSet: request.hasEndDate, field: "end_date")
        validator.range(first, last, field: "end_date")
        let pageSize = validator.pageSize(request.pageSize, rule: Self.entryPageSizes)
        var position: EntryPagePosition?
        if let token = validator.pageToken(request.pageToken, list: "entries", fieldCount: 2) {
            if let date = PageToken.date(token[0]), let id = UUID(canonical: token[1]) {
                position = EntryPagePosition(date: date, id: id)
            } else {
                validator.reject("page_token", "is not a token this list returned")
            }
        }
        try validator.check()
        let user = try await caller()
        if let habitID, try await store.habit(user: user.id, id: habitID) == nil {
            throw HabitsError.habitNotFound(habitID)
        }
        let entries = try await store.entries(
            user: user.id, habit: habitID, from: first, through: last, after: position, limit: pageSize + 1)
        return .with {
            let page = entries.prefix(pageSize)
            $0.entries = page.map(\.proto)
            if entries.count > pageSize, let last = page.last {
                $0.nextPageToken = PageToken.encode(
                    list: "entries", [String(last.date.daysSinceEpoch), last.id.lowercasedString])
            }
        }
    }

    // MARK: - Weeks

    func getWeek(
        request: Habitflow_Habits_V1_GetWeekRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_WeekView {
        var validator = RequestValidator()
        let requested = request.hasWeek ? validator.week(request.week, field: "week") : nil
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        let now = clock.now
        // One primary-key lookup; the cached view serves while the user's version is the one it was read at. With a
        // view kept, the same statement brings what changed in its week since (after a check-in, one day's count), so
        // the view is brought up to date instead of read again.
        var changes: WeekViewChanges?
        if let kept = weekViews.keptVersion(of: userID) {
            changes = try await store.weekViewChanges(user: userID, week: kept.week, since: kept.version.changeSequence)
        }
        let version = if let changes { changes.version } else { try await store.userVersion(userID, now: now) }
        zoneHints.remember(version.zoneName, for: userID)
        let zone = version.zone
        let today = zone.localDate(at: now)
        let current = IsoWeek(containing: today)
        let week = requested ?? current
        try requireNotAfter(week, current, field: "week")
        return try await weekViews.view(of: userID, week: week, today: today, version: version, changes: changes) {
            try await store.weekViewData(user: userID, zone: zone, week: week)
        }
    }

    func getScoreHistory(
        request: Habitflow_Habits_V1_GetScoreHistoryRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_GetScoreHistoryResponse {
        var validator = RequestValidator()
        let requestedEnd = request.hasEndWeek ? validator.week(request.endWeek, field: "end_week") : nil
        let requestedStart = request.hasStartWeek ? validator.week(request.startWeek, field: "start_week") : nil
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        let now = clock.now
        func range(current: IsoWeek) throws -> (first: IsoWeek, last: IsoWeek) {
            let last = requestedEnd ?? current
            let first = requestedStart ?? last.adding(weeks: 1 - Self.defaultHistoryWeeks)
            try requireNotAfter(last, current, field: "end_week")
            guard first <= last else {
                throw RPCError.invalidArgument(
                    field: "start_week", "must not be after end_week (\(last)), got \(first)")
            }
            guard first.weeks(until: last) < Self.maximumHistoryWeeks else {
                throw RPCError.invalidArgument(
                    field: "start_week", "the range must span at most \(Self.maximumHistoryWeeks) weeks")
            }
            return (first, last)
        }
        // The user's zone decides the current week. With the zone they had last time (a hint), one statement usually
        // answers: the counts, read with the stored zone and the habit-list version, and the habits kept from an
        // earlier history while that version stands. Without a hint (or when the hint's week refuses the range) the
        // habits come with the zone first, read for the weeks around the range in any zone (the current week is
        // UTC's or the one before or after it), a superset the tallies filter week by week (`HabitRecord.isLive(in:)`).
        func currentWeek(in zoneName: String) -> IsoWeek {
            IsoWeek(containing: UserTimeZone.stored(zoneName).localDate(at: now))
        }
        var zoneName: String
        var weeks: (first: IsoWeek, last: IsoWeek)
        var habits: [HabitRecord]?
        if let hinted = zoneHints.hint(for: userID), let hintedWeeks = try? range(current: currentWeek(in: hinted)) {
            (zoneName, weeks) = (hinted, hintedWeeks)
        } else {
            let lastAround = requestedEnd ?? IsoWeek(containing: UserTimeZone.utc.localDate(at: now))
            let widest = (
                first: (requestedStart ?? lastAround.adding(weeks: 1 - Self.defaultHistoryWeeks)).adding(weeks: -1),
                last: lastAround.adding(weeks: 1))
            var stored = try await store.zoneAndHabits(of: userID, liveBetween: widest.first, and: widest.last)
            if stored == nil {
                // A user the service has not seen is created (a deleted account refused); then they are known.
                _ = try await caller()
                stored = try await store.zoneAndHabits(of: userID, liveBetween: widest.first, and: widest.last)
            }
            guard let stored else { throw HabitsError.accountDeleted(userID) }
            zoneName = stored.zoneName
            weeks = try range(current: currentWeek(in: stored.zoneName))
            habits = stored.habits
        }
        var counted = try await weekCounts(of: userID, from: weeks.first, through: weeks.last)
        if counted.zoneName != zoneName {
            // The zone changed since it was read or hinted: the current week may be another, and so the range.
            zoneName = counted.zoneName
            let actual = try range(current: currentWeek(in: zoneName))
            if actual != weeks {
                weeks = actual
                counted = try await weekCounts(of: userID, from: weeks.first, through: weeks.last)
            }
        }
        zoneHints.remember(counted.zoneName, for: userID)
        let (first, last) = weeks
        let scored: [HabitRecord]
        if let habits {
            scored = habits
        } else {
            scored = try await scoredHabits(of: userID, from: first, through: last, version: counted.habitListVersion)
        }

        var completions: [Int: [UUID: Int]] = [:]  // by the week's Monday, in days since 1970-01-01
        for count in counted.counts.counts {
            completions[Int(count.monday), default: [:]][count.habitID] = Int(count.count)
        }
        return .with {
            $0.weeks = (0...first.weeks(until: last)).map { offset in
                let week = first.adding(weeks: offset)
                let counted = completions[week.monday.daysSinceEpoch] ?? [:]
                let score = WeeklyScore(WeekTallies.tallies(of: scored, in: week, completions: counted))
                return .with {
                    $0.week = week.proto
                    $0.weekName = week.description
                    $0.startDate = week.monday.proto
                    $0.score = score.proto
                }
            }
        }
    }

    /// The user's live entries counted per habit and week of `first...last`, with their stored zone and habit-list
    /// version: the counts kept from their last score history of the same weeks, brought up to date with the weeks
    /// changed since (usually this week's, after a check-in), or all of them read.
    private func weekCounts(
        of userID: UUID, from first: IsoWeek, through last: IsoWeek
    ) async throws -> ScoreHistoryCounts {
        let weeks = WeekRange(first: first, last: last)
        let kept = scoreHistoryCounts.answer(of: userID, for: weeks)
        guard
            var read = try await store.weekCounts(
                user: userID, from: first.monday, through: last.sunday, changedSince: kept?.asOf)
        else { throw HabitsError.accountDeleted(userID) }
        if let kept { read.counts = kept.updated(with: read.counts) }
        if read.counts.asOf != kept?.asOf { scoreHistoryCounts.store(read.counts, of: userID, for: weeks) }
        return read
    }

    /// The habits live at some time in `first...last`: kept from the user's last score history of the same weeks
    /// while their habit-list version is `version` (read before), or read and kept.
    private func scoredHabits(
        of userID: UUID, from first: IsoWeek, through last: IsoWeek, version: Int64
    ) async throws -> [HabitRecord] {
        let key = ScoredHabitsKey(version: version, weeks: WeekRange(first: first, last: last))
        if let kept = scoreHistoryHabits.answer(of: userID, for: key) { return kept }
        let habits = try await store.habits(of: [userID], liveBetween: first, and: last)[userID] ?? []
        scoreHistoryHabits.store(habits, of: userID, for: key)
        return habits
    }

    private func requireNotAfter(_ week: IsoWeek, _ current: IsoWeek, field: String) throws {
        guard week <= current else {
            throw RPCError.invalidArgument(field: field, "must not be after the current week (\(current)), got \(week)")
        }
    }

    // MARK: - Sync

    func listChanges(
        request: Habitflow_Habits_V1_ListChangesRequest, context: ServerContext
    ) async throws -> Habitflow_Habits_V1_ListChangesResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.changePageSizes)
        let cursor: ChangeCursor = validator.changeCursor(request.cursor)
        try validator.check()
        let user = try await caller()
        let (changes, hasMore) = try await store.changes(user: user.id, after: cursor, limit: pageSize)
        let next = changes.last?.cursor ?? cursor
        return .with {
            $0.changes = changes.map(\.proto)
            $0.nextCursor = next.token
            $0.hasMore_p = hasMore
        }
    }
}
