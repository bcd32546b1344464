public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres
internal import HabitFlowCrypto
public import HabitFlowServiceKit

/// A goal to create, validated by the RPC layer.
public struct NewGoal: Sendable, Hashable {
    public var id: UUID
    public var title: String
    public var description: String
    public var icon: String
    public var categoryID: UUID?
    public var type: GoalType
    public var target: Double
    public var unit: String?
    public var levels: [String]?
    public var ratingScale: Int?
    public var horizon: Horizon
    public var parentGoalID: UUID?
    /// The Monday of the first week.
    public var startDate: LocalDate
    public var targetDate: LocalDate?
    public var conversationID: String
    public var shared: Bool
    /// Habits of the owner's to link from the first week.
    public var habitIDs: [UUID]

    public init(
        id: UUID, title: String, description: String, icon: String, categoryID: UUID?, type: GoalType,
        target: Double, unit: String?, levels: [String]?, ratingScale: Int?, horizon: Horizon, parentGoalID: UUID?,
        startDate: LocalDate, targetDate: LocalDate?, conversationID: String, shared: Bool, habitIDs: [UUID]
    ) {
        self.id = id
        self.title = title
        self.description = description
        self.icon = icon
        self.categoryID = categoryID
        self.type = type
        self.target = target
        self.unit = unit
        self.levels = levels
        self.ratingScale = ratingScale
        self.horizon = horizon
        self.parentGoalID = parentGoalID
        self.startDate = startDate
        self.targetDate = targetDate
        self.conversationID = conversationID
        self.shared = shared
        self.habitIDs = habitIDs
    }
}

/// The fields an update sets; `nil` leaves a field as it is, `.some(nil)` clears an optional one.
public struct GoalChanges: Sendable, Hashable {
    public var title: String?
    public var description: String?
    public var icon: String?
    public var categoryID: UUID??
    public var target: Double?
    public var parentGoalID: UUID??
    public var targetDate: LocalDate??
    public var conversationID: String?
    public var shared: Bool?

    public init() {}
}

/// A user's goals with everything their progress is derived from, as one consistent read.
public struct UserGoals: Sendable, Hashable {
    public var version: UserVersion
    /// Live goals (not deleted), in creation order.
    public var goals: [GoalRecord]
    public var links: [UUID: [GoalLinkRecord]]
    /// Live assessments per goal.
    public var assessments: [UUID: [AssessmentRecord]]
    /// Per goal, the days its linked planning tasks were completed (deleted tasks included).
    public var taskCompletions: [UUID: [LocalDate]]
}

extension GoalsStore {
    /// A goal of the user's, deleted ones included; `nil` when the user has none with that id.
    public func goal(user userID: UUID, id: UUID) async throws -> GoalRecord? {
        try await goal(pool, user: userID, id: id)
    }

    func goal(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> GoalRecord? {
        try await database.queryRow("SELECT * FROM goal_details WHERE user_id = \(userID) AND id = \(id)")
            .map(GoalRecord.init(row:))
    }

    /// A live goal of the user's; deleted and unknown ids are ``GoalsError/goalNotFound(_:)``.
    func liveGoal(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> GoalRecord {
        guard let goal = try await goal(database, user: userID, id: id), !goal.isDeleted else {
            throw GoalsError.goalNotFound(id)
        }
        return goal
    }

    public func links(user userID: UUID, goal goalID: UUID) async throws -> [GoalLinkRecord] {
        try await pool.query(
            "SELECT * FROM goal_links WHERE user_id = \(userID) AND goal_id = \(goalID) ORDER BY linked_from, habit_id"
        ).map(GoalLinkRecord.init(row:))
    }

    /// Everything of the user's live goals, read under one version: the version is read first, so the data is never
    /// older than it (a write after the version only makes a later read miss the cache).
    public func userGoals(user userID: UUID, version: UserVersion) async throws -> UserGoals {
        let goals = try await pool.query(
            "SELECT * FROM goal_details WHERE user_id = \(userID) AND deleted_at IS NULL ORDER BY created_seq"
        ).map(GoalRecord.init(row:))
        let links = try await pool.query(
            """
            SELECT l.* FROM goal_links l JOIN goals g ON g.user_id = l.user_id AND g.id = l.goal_id \
            WHERE l.user_id = \(userID) AND g.deleted_at IS NULL ORDER BY l.linked_from, l.habit_id
            """
        ).map(GoalLinkRecord.init(row:))
        let assessments =
            goals.contains { $0.type.isAssessed }
            ? try await pool.query(
                """
                SELECT * FROM assessments WHERE user_id = \(userID) AND deleted_at IS NULL \
                ORDER BY local_date, created_at
                """
            ).map(AssessmentRecord.init(row:)) : []
        let taskCompletions = goals.contains { $0.type.linksTasks } ? try await taskCompletions(user: userID) : [:]
        return UserGoals(
            version: version, goals: goals, links: Dictionary(grouping: links, by: \.goalID),
            assessments: Dictionary(grouping: assessments, by: \.goalID), taskCompletions: taskCompletions)
    }

    /// Goals of the user's that may hold a slot of the limit by what is stored: active or paused, not ended by
    /// `today`. Whether one is completed by its progress is for the caller to say.
    public func slotCandidates(user userID: UUID, today: LocalDate) async throws -> [UUID] {
        try await slotCandidates(pool, user: userID, today: today)
    }

    private func slotCandidates(_ database: some PostgresQueryable, user userID: UUID, today: LocalDate) async throws
        -> [UUID]
    {
        try await database.query(
            """
            SELECT id FROM goals WHERE user_id = \(userID) AND deleted_at IS NULL \
            AND state IN ('active', 'paused') AND (end_date IS NULL OR end_date >= \(today))
            """
        ).map { try $0.decode(0, as: UUID.self) }
    }

    /// Refuses one more slot-holding goal once the user holds the limit, not counting `completedByProgress`.
    private func requireFreeSlot(
        _ transaction: PostgresTransaction, user userID: UUID, today: LocalDate, completedByProgress: Set<UUID>
    ) async throws {
        let holding = try await slotCandidates(transaction, user: userID, today: today)
            .filter { !completedByProgress.contains($0) }
        guard holding.count < GoalRules.maximumActiveGoals else { throw GoalsError.activeGoalLimit }
    }

    /// Creates the goal (with its first target period and links) unless a goal with its id exists: then that goal
    /// is returned as it is (a retry), before any rule is checked. A shared goal needs `partnership` (social's answer
    /// just now), which must not have ended meanwhile.
    func createGoal(
        user userID: UUID, _ new: NewGoal, today: LocalDate, completedByProgress: Set<UUID>, now: Date,
        partnership: PartnershipInfo? = nil
    ) async throws -> GoalRecord {
        let partnership = new.shared ? partnership : nil
        if new.shared, partnership == nil { throw GoalsError.noPartner }
        return try await write(user: userID, sharingUnder: partnership) { transaction, sequence in
            if let existing = try await goal(transaction, user: userID, id: new.id) { return existing }
            if let categoryID = new.categoryID {
                try await requireCategoryNotDeleted(transaction, user: userID, id: categoryID)
            }
            if let parentID = new.parentGoalID {
                try await requireParent(transaction, user: userID, parent: parentID, child: new.id, horizon: new.horizon)
            }
            try await requireFreeSlot(transaction, user: userID, today: today, completedByProgress: completedByProgress)
            let endDate = new.horizon.lastDay(startingOn: new.startDate)
            try await transaction.execute(
                """
                WITH goal AS ( \
                INSERT INTO goals (user_id, id, title, description, icon, category_id, type, horizon, unit, levels, \
                rating_scale, parent_goal_id, start_date, end_date, target_date, conversation_id, shared, created_at, \
                updated_at, change_seq, created_seq, partner_id, partnership_id) VALUES (\(userID), \(new.id), \(new.title), \(new.description), \
                \(new.icon), \(new.categoryID as UUID?), \(new.type.rawValue), \(new.horizon.rawValue), \(new.unit as String?), \
                \(new.levels as [String]?), \(new.ratingScale.map(Int16.init) as Int16?), \(new.parentGoalID as UUID?), \(new.startDate), \
                \(endDate as LocalDate?), \(new.targetDate as LocalDate?), \(new.conversationID), \(new.shared), \(now), \(now), \(sequence), \
                \(sequence), \(partnership?.partnerID as UUID?), \(partnership?.id as UUID?)) RETURNING user_id, id) \
                INSERT INTO goal_targets (user_id, goal_id, week_start, value) \
                SELECT user_id, id, \(new.startDate), \(Decimal.exact(new.target)) FROM goal
                """)
            if !new.habitIDs.isEmpty {
                try await transaction.execute(
                    """
                    INSERT INTO goal_links (user_id, goal_id, habit_id, habit_user_id, linked_from) \
                    SELECT \(userID), \(new.id), habit_id, \(userID), \(new.startDate) \
                    FROM unnest(\(new.habitIDs)::uuid[]) AS h(habit_id)
                    """)
            }
            return try await liveGoal(transaction, user: userID, id: new.id)
        }
    }

    /// Sets the given fields (last write wins). A new target applies from `today`'s week on: that week's period is
    /// added or replaced, earlier periods stay. Sharing needs `partnership` (social's answer just now); unsharing
    /// ends the partner's links with `today`'s week and takes the goal from them.
    func updateGoal(
        user userID: UUID, id: UUID, changes: GoalChanges, today: LocalDate, now: Date,
        partnership: PartnershipInfo? = nil
    ) async throws -> GoalRecord {
        let partnership = changes.shared == true ? partnership : nil
        return try await write(user: userID, sharingUnder: partnership) { transaction, sequence in
            let current = try await liveGoal(transaction, user: userID, id: id)
            if case .some(.some(let categoryID)) = changes.categoryID {
                try await requireCategoryNotDeleted(transaction, user: userID, id: categoryID)
            }
            if case .some(.some(let parentID)) = changes.parentGoalID {
                try await requireParent(transaction, user: userID, parent: parentID, child: id, horizon: current.horizon)
            }
            var partnerID = current.partnerID
            var partnershipID = try await transaction.queryRow(
                "SELECT partnership_id FROM goals WHERE user_id = \(userID) AND id = \(id)"
            )?.decode(0, as: UUID?.self)
            if changes.shared == true, !current.shared {
                guard let partnership else { throw GoalsError.noPartner }
                partnerID = partnership.partnerID
                partnershipID = partnership.id
            } else if changes.shared == false, let formerPartner = current.partnerID {
                try await unshareGoal(
                    transaction, owner: userID, goal: id, partner: formerPartner,
                    sunday: IsoWeek(containing: max(today, current.startDate)).sunday, sequence: sequence, now: now)
                partnerID = nil
                partnershipID = nil
            }
            try await transaction.execute(
                """
                UPDATE goals SET title = \(changes.title ?? current.title), \
                description = \(changes.description ?? current.description), icon = \(changes.icon ?? current.icon), \
                category_id = \((changes.categoryID ?? current.categoryID) as UUID?), \
                parent_goal_id = \((changes.parentGoalID ?? current.parentGoalID) as UUID?), \
                target_date = \((changes.targetDate ?? current.targetDate) as LocalDate?), \
                conversation_id = \(changes.conversationID ?? current.conversationID), \
                shared = \(partnerID != nil), partner_id = \(partnerID as UUID?), \
                partnership_id = \(partnershipID as UUID?), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
            let week = IsoWeek(containing: max(today, current.startDate))
            if let target = changes.target, target != current.target(in: week) {
                try await transaction.execute(
                    """
                    INSERT INTO goal_targets (user_id, goal_id, week_start, value) \
                    VALUES (\(userID), \(id), \(week.monday), \(Decimal.exact(target))) \
                    ON CONFLICT (user_id, goal_id, week_start) DO UPDATE SET value = EXCLUDED.value
                    """)
            }
            return try await liveGoal(transaction, user: userID, id: id)
        }
    }

    /// A state change the user asked for.
    public enum Transition: String, Sendable {
        case pause, resume, complete, archive, restore

        /// The state it leads to.
        var target: GoalState {
            switch self {
            case .pause: .paused
            case .resume, .restore: .active
            case .complete: .completed
            case .archive: .archived
            }
        }

        /// The states it starts from (the target state itself answers the goal unchanged).
        var sources: Set<GoalState> {
            switch self {
            case .pause: [.active]
            case .resume: [.paused]
            case .complete: [.active, .paused]
            case .archive: [.active, .paused, .completed]
            case .restore: [.archived, .completed]
            }
        }
    }

    /// Applies `transition`; a goal already in its target state is returned unchanged. Restoring re-checks the
    /// limit; archiving detaches the goal's children.
    public func transition(
        user userID: UUID, id: UUID, _ transition: Transition, today: LocalDate, completedByProgress: Set<UUID>,
        now: Date
    ) async throws -> GoalRecord {
        try await write(user: userID) { transaction, sequence in
            let current = try await liveGoal(transaction, user: userID, id: id)
            if current.state == transition.target { return current }
            guard transition.sources.contains(current.state) else {
                throw GoalsError.invalidTransition(goal: id, from: current.state.rawValue, action: transition.rawValue)
            }
            if transition == .restore, !current.hasEnded(by: today) {
                try await requireFreeSlot(
                    transaction, user: userID, today: today, completedByProgress: completedByProgress)
            }
            try await transaction.execute(
                """
                UPDATE goals SET state = \(transition.target.rawValue), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
            if transition == .archive {
                try await detachChildren(transaction, user: userID, parent: id, sequence: sequence, now: now)
            }
            return try await liveGoal(transaction, user: userID, id: id)
        }
    }

    /// Deletes the goal (a tombstone): its open links end with `today`'s week, its children are detached and its
    /// planning tasks unlinked (they stay).
    /// Returns the goal as it was; `nil` when it was deleted already.
    public func deleteGoal(user userID: UUID, id: UUID, today: LocalDate, now: Date) async throws -> GoalRecord? {
        try await write(user: userID) { transaction, sequence in
            guard let current = try await goal(transaction, user: userID, id: id) else {
                throw GoalsError.goalNotFound(id)
            }
            if current.isDeleted { return nil }
            try await transaction.execute(
                """
                UPDATE goals SET deleted_at = \(now), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
            try await endOpenLinks(transaction, user: userID, goal: id, today: today)
            try await detachChildren(transaction, user: userID, parent: id, sequence: sequence, now: now)
            try await unlinkTasks(transaction, user: userID, goal: id, sequence: sequence, now: now)
            return current
        }
    }

    private func detachChildren(
        _ transaction: PostgresTransaction, user userID: UUID, parent: UUID, sequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE goals SET parent_goal_id = NULL, updated_at = \(now), change_seq = \(sequence) \
            WHERE user_id = \(userID) AND parent_goal_id = \(parent)
            """)
    }

    private func requireCategoryNotDeleted(_ transaction: PostgresTransaction, user userID: UUID, id: UUID)
        async throws
    {
        let deleted = try await transaction.queryRow(
            "SELECT 1 FROM deleted_categories WHERE user_id = \(userID) AND category_id = \(id)")
        if deleted != nil { throw GoalsError.categoryNotFound(id) }
    }

    /// The parent must be a live, unarchived goal of the user's with a strictly longer horizon, and the chain above
    /// it short enough; a goal can never become its own ancestor.
    private func requireParent(
        _ transaction: PostgresTransaction, user userID: UUID, parent parentID: UUID, child childID: UUID,
        horizon: Horizon
    ) async throws {
        guard parentID != childID, let parent = try await goal(transaction, user: userID, id: parentID),
            !parent.isDeleted, parent.state != .archived
        else { throw GoalsError.parentNotFound(parentID) }
        guard parent.horizon > horizon else {
            throw GoalsError.parentHorizonNotLonger(parent: parent.horizon, child: horizon)
        }
        let depth = try await transaction.queryRow(
            """
            WITH RECURSIVE chain(id, parent_goal_id, depth) AS ( \
            SELECT id, parent_goal_id, 1 FROM goals WHERE user_id = \(userID) AND id = \(parentID) \
            UNION ALL SELECT g.id, g.parent_goal_id, c.depth + 1 FROM goals g JOIN chain c ON g.id = c.parent_goal_id \
            WHERE g.user_id = \(userID) AND c.depth < 64) \
            SELECT max(depth), bool_or(id = \(childID)) FROM chain
            """)
        let ancestors = try depth?.decode(0, as: Int32?.self) ?? 0
        let cycle = try depth?.decode(1, as: Bool?.self) ?? false
        // The chain above the new parent, plus the parent itself, plus the goal: at most maximumDepth.
        guard !cycle, Int(ancestors) + 1 <= GoalRules.maximumDepth else { throw GoalsError.hierarchyTooDeep }
    }
}
