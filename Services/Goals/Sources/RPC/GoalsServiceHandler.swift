internal import HabitFlowInternalCredential
internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// `habitflow.goals.v1.GoalsService`: the public API, always on behalf of the user the gateway authenticated.
///
/// Every answer that carries a goal derives its progress through ``GoalProgressReader`` (one call to habits).
struct GoalsServiceHandler: Habitflow_Goals_V1_GoalsService.Handler {
    let store: GoalsStore
    let reader: GoalProgressReader
    /// Social, asked for the caller's partner when a goal is shared (`GoalsServiceHandler+Sharing`).
    let partners: PartnerSource

    static let goalPageSizes = PageSizeRule.standard
    static let assessmentPageSizes = PageSizeRule.standard
    static let changePageSizes = PageSizeRule(defaultSize: 500, maximum: 1000)
    static let taskPageSizes = PageSizeRule.standard
    static let reviewPageSizes = PageSizeRule.standard
    static let maximumHistoryWeeks = 530
    static let maximumInitialLinks = 20

    private var habits: HabitsSource { reader.habits }
    var clock: UserClock { reader.clock }

    /// The calling user, known to the service from here on, with their today.
    func caller() async throws -> (id: UUID, today: LocalDate) {
        let userID = try CallerIdentity.requireUser()
        let version = try await store.userVersion(userID, now: clock.now)
        return (userID, clock.today(in: version.zone))
    }

    /// A live goal of the user's with its progress now.
    private func answer(_ goalID: UUID, user userID: UUID, context: ServerContext) async throws
        -> Habitflow_Goals_V1_Goal
    {
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        guard let goal = snapshot.goals.goals.first(where: { $0.id == goalID }) else {
            throw GoalsError.goalNotFound(goalID)
        }
        return snapshot.proto(of: goal)
    }

    /// Among the user's goals that hold a slot by what is stored, those whose progress completed them: they do not
    /// count toward the limit. Derived only when the stored count reaches the limit.
    private func completedByProgress(user userID: UUID, today: LocalDate, context: ServerContext) async throws
        -> Set<UUID>
    {
        let candidates = try await store.slotCandidates(user: userID, today: today)
        guard candidates.count >= GoalRules.maximumActiveGoals else { return [] }
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        return Set(candidates.filter { snapshot.progress[$0]?.status == .completed })
    }

    private static func unitHolder(_ goalID: UUID) -> String { "goal:\(goalID.lowercasedString)" }

    /// Checks with habits that each habit is the user's, live, and (for a quantity goal) in the goal's unit, and
    /// that `categoryID` is one of the user's live categories.
    private func requireHabits(
        _ habitIDs: [UUID], unit: String?, category categoryID: UUID?, user userID: UUID, context: ServerContext
    ) async throws {
        guard categoryID != nil || !habitIDs.isEmpty else { return }
        let found = try await habits.lookup(
            user: userID, habits: habitIDs, options: CallOptions().propagating(from: context))
        if let categoryID, !found.categories.contains(where: { $0.id == categoryID }) {
            throw GoalsError.categoryNotFound(categoryID)
        }
        for habitID in habitIDs {
            guard let habit = found.habits[habitID] else { throw GoalsError.habitNotFound(habitID) }
            if habit.deleted { throw GoalsError.habitDeleted(habitID) }
            if let unit, habit.unit != unit {
                throw GoalsError.unitMismatch(habitID: habitID, habitUnit: habit.unit, goalUnit: unit)
            }
        }
    }

    /// Makes the quantity goal hold the units of exactly `habitIDs`, leaving out habits deleted meanwhile (habits
    /// holds no deleted habit; their links end when HabitDeleted arrives).
    private func holdUnits(
        of habitIDs: [UUID], for goal: GoalRecord, unit: String, user userID: UUID, context: ServerContext
    ) async throws {
        let options = CallOptions().propagating(from: context)
        var held = Array(Set(habitIDs))
        if !held.isEmpty {
            let found = try await habits.lookup(user: userID, habits: held, options: options)
            held.removeAll { found.habits[$0]?.deleted ?? true }
        }
        try await habits.setUnitHolds(
            user: userID, holder: Self.unitHolder(goal.id), habits: held, unit: unit, options: options)
    }

    // MARK: - Goals

    func createGoal(
        request: Habitflow_Goals_V1_CreateGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        var validator = RequestValidator()
        let id = validator.clientID(request.goalID, field: "goal_id")
        let title = validator.name(request.title, field: "title", maximumLength: GoalRules.maximumTitleLength)
        let description = validator.text(
            request.description_p, field: "description", maximumLength: GoalRules.maximumDescriptionLength)
        let icon = validator.icon(request.icon, field: "icon")
        let categoryID = validator.optionalID(request.categoryID, field: "category_id")
        let type = validator.type(request.type, field: "type")
        let horizon = validator.horizon(request.horizon, field: "horizon")
        let definition = validator.targetDefinition(request.target, type: type)
        let parentID = validator.optionalID(request.parentGoalID, field: "parent_goal_id")
        let conversationID = validator.text(
            request.conversationID, field: "conversation_id", maximumLength: GoalRules.maximumConversationIDLength)
        let habitIDs = validator.habitIDs(request.habitIds, field: "habit_ids", maximum: Self.maximumInitialLinks)
        if type.isAssessed, !habitIDs.isEmpty {
            validator.reject("habit_ids", "a \(type.rawValue) goal counts assessments, not habits")
        }
        let startDate = request.hasStartDate ? validator.date(request.startDate, field: "start_date") : nil
        let targetDate = request.hasTargetDate ? validator.date(request.targetDate, field: "target_date") : nil
        try validator.check()
        let user = try await caller()
        if let startDate, startDate > user.today {
            throw RPCError.invalidArgument(field: "start_date", "must not be after today (\(user.today)), got \(startDate)")
        }
        if let id, let existing = try await store.goal(user: user.id, id: id) {
            return existing.isDeleted
                ? existing.proto(links: try await store.links(user: user.id, goal: id))
                : try await answer(id, user: user.id, context: context)
        }
        let goalID = id ?? UUID.random()
        let partnership = request.shared ? try await requirePartnership(user: user.id, context: context) : nil
        try await requireHabits(habitIDs, unit: definition.unit, category: categoryID, user: user.id, context: context)
        let holdsUnits = type == .quantity && !habitIDs.isEmpty
        let options = CallOptions().propagating(from: context)
        if holdsUnits, let unit = definition.unit {
            try await habits.setUnitHolds(
                user: user.id, holder: Self.unitHolder(goalID), habits: habitIDs, unit: unit, options: options)
        }
        let new = NewGoal(
            id: goalID, title: title, description: description, icon: icon, categoryID: categoryID, type: type,
            target: definition.value, unit: definition.unit, levels: definition.levels,
            ratingScale: definition.ratingScale, horizon: horizon, parentGoalID: parentID,
            startDate: IsoWeek(containing: startDate ?? user.today).monday, targetDate: targetDate,
            conversationID: conversationID, shared: request.shared, habitIDs: habitIDs)
        do {
            let completed = try await completedByProgress(user: user.id, today: user.today, context: context)
            _ = try await store.createGoal(
                user: user.id, new, today: user.today, completedByProgress: completed, now: clock.now,
                partnership: partnership)
        } catch {
            if holdsUnits {
                try? await habits.setUnitHolds(
                    user: user.id, holder: Self.unitHolder(goalID), habits: [], unit: "", options: options)
            }
            throw error
        }
        return try await answer(goalID, user: user.id, context: context)
    }

    func getGoal(
        request: Habitflow_Goals_V1_GetGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        var validator = RequestValidator()
        let id = validator.id(request.goalID, field: "goal_id")
        try validator.check()
        return try await answer(id, user: try CallerIdentity.requireUser(), context: context)
    }

    func listGoals(
        request: Habitflow_Goals_V1_ListGoalsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListGoalsResponse {
        var validator = RequestValidator()
        let filter = GoalListFilter(
            statuses: request.statuses, horizon: request.horizon, categoryID: request.categoryID,
            parentGoalID: request.parentGoalID, pageSize: request.pageSize, pageToken: request.pageToken,
            validator: &validator)
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        return try goalPage(
            filter, user: userID,
            snapshot: try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context)))
    }

    func getGoalsOverview(
        request: Habitflow_Goals_V1_GetGoalsOverviewRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_GoalsOverview {
        var validator = RequestValidator()
        let filter = GoalListFilter(
            statuses: request.statuses, horizon: .unspecified, categoryID: "", parentGoalID: "",
            pageSize: request.pageSize, pageToken: "", validator: &validator)
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        // The goals first: reading them prepares a new user (or refuses a deleted one), so the ratings' one
        // statement finds the user.
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        let page = try goalPage(filter, user: userID, snapshot: snapshot)
        // Most users have rated nothing: that is kept with goals' version (every review write takes the next one), so
        // the ratings are read again only after a write of the user's.
        let ratings: CategoryRatings
        if reader.hasNoRatings(userID, at: snapshot.version) {
            ratings = CategoryRatings(points: [], live: [], deleted: [])
        } else {
            ratings = try await categoryRatings(of: userID, context: context)
            // No rating: every rated category has a history.
            if ratings.history.isEmpty { reader.rememberNoRatings(userID, at: snapshot.version) }
        }
        // The page may be a cached answer in its wire form (empty to read here); the overview's goals and token have
        // ListGoalsResponse's field numbers, so its bytes are the overview's first two fields.
        var overview = try Habitflow_Goals_V1_GoalsOverview(serializedBytes: try page.serializedBytes() as [UInt8])
        overview.latestCategoryRatings = ratings.latestProto
        return overview
    }

    /// A page of the user's goals that `filter` selects (a cached answer is in its wire form: see `wireForm()`).
    private func goalPage(
        _ filter: GoalListFilter, user userID: UUID, snapshot: GoalsSnapshot
    ) throws -> Habitflow_Goals_V1_ListGoalsResponse {
        try reader.list(
            of: userID, from: snapshot, request: "\(filter.listName)|\(filter.offset)|\(filter.pageSize)"
        ) {
            let matching = snapshot.orderedGoals.filter { goal in
                filter.matches(goal, status: snapshot.progress[goal.id]?.status)
            }
            let page = matching.dropFirst(filter.offset).prefix(filter.pageSize)
            return .with {
                $0.goals = page.map(snapshot.proto(of:))
                if filter.offset + page.count < matching.count {
                    $0.nextPageToken = PageToken.encode(list: filter.listName, [String(filter.offset + page.count)])
                }
            }
        }
    }

    func updateGoal(
        request: Habitflow_Goals_V1_UpdateGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        var validator = RequestValidator()
        let id = validator.id(request.goal.id, field: "goal.id")
        let paths = request.updateMask.paths
        if paths.isEmpty {
            validator.reject("update_mask", "is required: name the fields to change (\(Self.updatablePaths.joined(separator: ", ")))")
        }
        for (index, path) in paths.enumerated() where !Self.updatablePaths.contains(path) {
            validator.reject(
                "update_mask.paths[\(index)]",
                Self.fixedPaths.contains(path)
                    ? "\(path) is fixed when the goal is created"
                    : "\(path) is not a field UpdateGoal changes (\(Self.updatablePaths.joined(separator: ", ")))")
        }
        try validator.check()
        let user = try await caller()
        let current = try await ownerOnly(id, user: user.id) {
            guard let current = try await store.goal(user: user.id, id: id), !current.isDeleted else {
                throw GoalsError.goalNotFound(id)
            }
            return current
        }
        let goal = request.goal
        var changes = GoalChanges()
        for path in Set(paths) {
            switch path {
            case "title":
                changes.title = validator.name(goal.title, field: "goal.title", maximumLength: GoalRules.maximumTitleLength)
            case "description":
                changes.description = validator.text(
                    goal.description_p, field: "goal.description", maximumLength: GoalRules.maximumDescriptionLength)
            case "icon": changes.icon = validator.icon(goal.icon, field: "goal.icon")
            case "category_id": changes.categoryID = .some(validator.optionalID(goal.categoryID, field: "goal.category_id"))
            case "target", "target.value":
                changes.target = validator.targetValue(
                    goal.target.value, type: current.type, levelCount: current.levels?.count ?? 0,
                    ratingScale: current.ratingScale ?? 0, field: "goal.target.value")
            case "parent_goal_id":
                changes.parentGoalID = .some(validator.optionalID(goal.parentGoalID, field: "goal.parent_goal_id"))
            case "target_date":
                changes.targetDate = .some(goal.hasTargetDate ? validator.date(goal.targetDate, field: "goal.target_date") : nil)
            case "conversation_id":
                changes.conversationID = validator.text(
                    goal.conversationID, field: "goal.conversation_id",
                    maximumLength: GoalRules.maximumConversationIDLength)
            case "shared": changes.shared = goal.shared
            default: break
            }
        }
        try validator.check()
        if case .some(.some(let categoryID)) = changes.categoryID {
            try await requireHabits([], unit: nil, category: categoryID, user: user.id, context: context)
        }
        let partnership =
            changes.shared == true && !current.shared
            ? try await requirePartnership(user: user.id, context: context) : nil
        _ = try await store.updateGoal(
            user: user.id, id: id, changes: changes, today: user.today, now: clock.now, partnership: partnership)
        if changes.shared == false, let formerPartner = current.partnerID, current.type == .quantity {
            // The partner's links ended: their habits no longer hold the goal's unit.
            try await habits.setUnitHolds(
                user: formerPartner, holder: Self.unitHolder(id), habits: [], unit: "",
                options: CallOptions().propagating(from: context))
        }
        return try await answer(id, user: user.id, context: context)
    }

    static let updatablePaths = [
        "title", "description", "icon", "category_id", "target", "target.value", "parent_goal_id", "target_date",
        "conversation_id", "shared",
    ]
    static let fixedPaths: Set<String> = [
        "id", "owner_id", "type", "horizon", "start_date", "end_date", "target.unit", "target.levels",
        "target.rating_scale",
    ]

    private func transition(
        _ goalID: String, _ transition: GoalsStore.Transition, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        var validator = RequestValidator()
        let id = validator.id(goalID, field: "goal_id")
        try validator.check()
        let user = try await caller()
        let completed =
            transition == .restore ? try await completedByProgress(user: user.id, today: user.today, context: context) : []
        _ = try await ownerOnly(id, user: user.id) {
            try await store.transition(
                user: user.id, id: id, transition, today: user.today, completedByProgress: completed, now: clock.now)
        }
        return try await answer(id, user: user.id, context: context)
    }

    func pauseGoal(
        request: Habitflow_Goals_V1_PauseGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        try await transition(request.goalID, .pause, context: context)
    }

    func resumeGoal(
        request: Habitflow_Goals_V1_ResumeGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        try await transition(request.goalID, .resume, context: context)
    }

    func completeGoal(
        request: Habitflow_Goals_V1_CompleteGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        try await transition(request.goalID, .complete, context: context)
    }

    func archiveGoal(
        request: Habitflow_Goals_V1_ArchiveGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        try await transition(request.goalID, .archive, context: context)
    }

    func restoreGoal(
        request: Habitflow_Goals_V1_RestoreGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        try await transition(request.goalID, .restore, context: context)
    }

    func deleteGoal(
        request: Habitflow_Goals_V1_DeleteGoalRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_DeleteGoalResponse {
        var validator = RequestValidator()
        let id = validator.id(request.goalID, field: "goal_id")
        try validator.check()
        let user = try await caller()
        let deleted = try await ownerOnly(id, user: user.id) {
            try await store.deleteGoal(user: user.id, id: id, today: user.today, now: clock.now)
        }
        if let deleted, deleted.type == .quantity {
            // The creator's habits and, on a shared goal, the partner's.
            for holder in [user.id] + (deleted.partnerID.map { [$0] } ?? []) {
                try await habits.setUnitHolds(
                    user: holder, holder: Self.unitHolder(id), habits: [], unit: "",
                    options: CallOptions().propagating(from: context))
            }
        }
        return Habitflow_Goals_V1_DeleteGoalResponse()
    }

    // MARK: - Links

    func linkHabit(
        request: Habitflow_Goals_V1_LinkHabitRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        var validator = RequestValidator()
        let goalID = validator.id(request.goalID, field: "goal_id")
        let habitID = validator.id(request.habitID, field: "habit_id")
        try validator.check()
        let user = try await caller()
        // The caller's own goal, or one shared with them: either way they link a habit of their own.
        let tracked = try await trackedGoal(goalID, user: user)
        let goal = tracked.goal
        if goal.type.isAssessed { throw GoalsError.notLinkable(goal.type) }
        guard goal.type == .quantity, let unit = goal.unit else {
            try await requireHabits([habitID], unit: nil, category: nil, user: user.id, context: context)
            _ = try await store.linkHabit(
                user: tracked.owner, goal: goalID, habit: habitID, habitUser: user.id, today: tracked.ownerToday,
                now: clock.now)
            return try await answer(goalID, user: user.id, context: context)
        }
        // The unit is held before the link exists, so habits never sees a linked habit change its unit.
        let linked = try await store.openLinks(user: tracked.owner, goal: goalID)
            .filter { $0.habitUserID == user.id }.map(\.habitID)
        try await requireHabits([habitID], unit: unit, category: nil, user: user.id, context: context)
        try await holdUnits(of: linked + [habitID], for: goal, unit: unit, user: user.id, context: context)
        do {
            _ = try await store.linkHabit(
                user: tracked.owner, goal: goalID, habit: habitID, habitUser: user.id, today: tracked.ownerToday,
                now: clock.now)
        } catch {
            try? await holdUnits(of: linked, for: goal, unit: unit, user: user.id, context: context)
            throw error
        }
        return try await answer(goalID, user: user.id, context: context)
    }

    func unlinkHabit(
        request: Habitflow_Goals_V1_UnlinkHabitRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Goal {
        var validator = RequestValidator()
        let goalID = validator.id(request.goalID, field: "goal_id")
        let habitID = validator.id(request.habitID, field: "habit_id")
        try validator.check()
        let user = try await caller()
        let tracked = try await trackedGoal(goalID, user: user)
        let goal = try await store.unlinkHabit(
            user: tracked.owner, goal: goalID, habit: habitID, habitUser: user.id, today: tracked.ownerToday,
            now: clock.now)
        if goal.type == .quantity, let unit = goal.unit {
            // Sent on every unlink, so a retry after a failed call here sets the holds right.
            let remaining = try await store.openLinks(user: tracked.owner, goal: goalID)
                .filter { $0.habitUserID == user.id }.map(\.habitID)
            try await holdUnits(of: remaining, for: goal, unit: unit, user: user.id, context: context)
        }
        return try await answer(goalID, user: user.id, context: context)
    }

    // MARK: - Assessments

    func addAssessment(
        request: Habitflow_Goals_V1_AddAssessmentRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Assessment {
        var validator = RequestValidator()
        let id = validator.clientID(request.assessmentID, field: "assessment_id")
        let goalID = validator.id(request.goalID, field: "goal_id")
        let note = validator.text(request.note, field: "note", maximumLength: GoalRules.maximumNoteLength)
        try validator.check()
        let user = try await caller()
        let date = request.hasDate ? validator.pastDate(request.date, field: "date", today: user.today) : user.today
        // Both partners assess a shared goal; assessments are kept with the goal, under its creator.
        let tracked = try await trackedGoal(goalID, user: user)
        let goal = tracked.goal
        if goal.type == .level {
            let count = goal.levels?.count ?? 0
            if !(1...max(count, 1)).contains(Int(request.value)) {
                validator.reject("value", "must be the position of one of the goal's levels (1 to \(count)), got \(request.value)")
            }
        } else if goal.type == .rating {
            let scale = goal.ratingScale ?? 5
            if !(1...scale).contains(Int(request.value)) {
                validator.reject("value", "must be a rating from 1 to \(scale), got \(request.value)")
            }
        }
        try validator.check()
        return try await store.addAssessment(
            user: tracked.owner, id: id ?? UUID.random(), goal: goalID, date: date, value: Int(request.value), note: note,
            now: clock.now
        ).proto
    }

    func listAssessments(
        request: Habitflow_Goals_V1_ListAssessmentsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListAssessmentsResponse {
        var validator = RequestValidator()
        let goalID = validator.id(request.goalID, field: "goal_id")
        let pageSize = validator.pageSize(request.pageSize, rule: Self.assessmentPageSizes)
        let listName = "assessments:\(goalID.lowercasedString)"
        let after = validator.datedPosition(request.pageToken, list: listName)
            .map { (date: $0.date, sequence: $0.sequence) }
        try validator.check()
        let user = try await caller()
        let owner = try await trackedGoal(goalID, user: user).owner
        let assessments = try await store.assessments(user: owner, goal: goalID, after: after, limit: pageSize + 1)
        return .with {
            let page = assessments.prefix(pageSize)
            $0.assessments = page.map(\.proto)
            if assessments.count > pageSize, let last = page.last {
                $0.nextPageToken = DatedPosition(date: last.date, sequence: last.changeSequence).token(list: listName)
            }
        }
    }

    func deleteAssessment(
        request: Habitflow_Goals_V1_DeleteAssessmentRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_DeleteAssessmentResponse {
        var validator = RequestValidator()
        let goalID = validator.id(request.goalID, field: "goal_id")
        let id = validator.id(request.assessmentID, field: "assessment_id")
        try validator.check()
        let user = try await caller()
        let owner = try await trackedGoal(goalID, user: user).owner
        try await store.deleteAssessment(user: owner, goal: goalID, id: id, now: clock.now)
        return Habitflow_Goals_V1_DeleteAssessmentResponse()
    }
}

/// A goal's target as a request defines it, checked against the goal's type.
struct TargetDefinition {
    var value: Double
    var unit: String?
    var levels: [String]?
    var ratingScale: Int?
}

extension RequestValidator {
    /// The target fields of a new goal: the ones its type uses are checked, the others must be unset.
    mutating func targetDefinition(_ target: Habitflow_Goals_V1_GoalTarget, type: GoalType) -> TargetDefinition {
        let unit = type == .quantity ? unit(target.unit, field: "target.unit") : nil
        if type != .quantity, !target.unit.isEmpty { reject("target.unit", "is for quantity goals only") }
        let levels = type == .level ? levels(target.levels, field: "target.levels") : nil
        if type != .level, !target.levels.isEmpty { reject("target.levels", "is for level goals only") }
        let scale = type == .rating ? ratingScale(target.ratingScale, field: "target.rating_scale") : nil
        if type != .rating, target.ratingScale != 0 { reject("target.rating_scale", "is for rating goals only") }
        let value = targetValue(
            target.value, type: type, levelCount: levels?.count ?? 0, ratingScale: scale ?? 0, field: "target.value")
        return TargetDefinition(value: value, unit: unit, levels: levels, ratingScale: scale)
    }
}
