public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres

/// A planning task to create, validated by the RPC layer.
public struct NewTask: Sendable, Hashable {
    public var id: UUID
    public var title: String
    public var week: IsoWeek
    public var goalID: UUID?

    public init(id: UUID, title: String, week: IsoWeek, goalID: UUID?) {
        self.id = id
        self.title = title
        self.week = week
        self.goalID = goalID
    }
}

extension GoalsStore {
    /// Creates the task unless the user has one with its id: then that task is returned as it is (a retry), before
    /// any rule is checked. A goal to link must be live, the user's, active or paused, and of a type that links tasks.
    public func createTask(user userID: UUID, _ new: NewTask, now: Date) async throws -> TaskRecord {
        try await write(user: userID) { transaction, sequence in
            if let existing = try await task(transaction, user: userID, id: new.id) { return existing }
            if let goalID = new.goalID { try await requireTaskLinkableGoal(transaction, user: userID, id: goalID) }
            try await transaction.execute(
                """
                INSERT INTO tasks (user_id, id, title, week_start, goal_id, created_at, updated_at, change_seq, \
                created_seq) VALUES (\(userID), \(new.id), \(new.title), \(new.week.monday), \(new.goalID as UUID?), \
                \(now), \(now), \(sequence), \(sequence))
                """)
            return try await liveTask(transaction, user: userID, id: new.id)
        }
    }

    /// Sets the given fields (last write wins). A new link is checked like one at creation; keeping the current
    /// link is not re-checked. A completed task's completion moves with its link.
    public func updateTask(user userID: UUID, id: UUID, changes: TaskChanges, now: Date) async throws -> TaskRecord {
        try await write(user: userID) { transaction, sequence in
            let current = try await liveTask(transaction, user: userID, id: id)
            if case .some(.some(let goalID)) = changes.goalID, goalID != current.goalID {
                try await requireTaskLinkableGoal(transaction, user: userID, id: goalID)
            }
            try await transaction.execute(
                """
                UPDATE tasks SET title = \(changes.title ?? current.title), \
                week_start = \((changes.week ?? current.week).monday), \
                goal_id = \((changes.goalID ?? current.goalID) as UUID?), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
            return try await liveTask(transaction, user: userID, id: id)
        }
    }

    /// Marks the task completed on `day` (`nil`: open again). A task already in that state is returned unchanged
    /// (completing a completed task keeps its first day).
    public func setTaskCompletion(user userID: UUID, id: UUID, on day: LocalDate?, now: Date) async throws
        -> TaskRecord
    {
        try await write(user: userID) { transaction, sequence in
            let current = try await liveTask(transaction, user: userID, id: id)
            if (current.completedOn != nil) == (day != nil) { return current }
            try await transaction.execute(
                """
                UPDATE tasks SET completed_on = \(day as LocalDate?), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
            return try await liveTask(transaction, user: userID, id: id)
        }
    }

    /// Deletes the task (a tombstone): a completed linked task keeps counting for its goal. Deleting again succeeds.
    public func deleteTask(user userID: UUID, id: UUID, now: Date) async throws {
        try await write(user: userID) { transaction, sequence in
            guard let current = try await task(transaction, user: userID, id: id) else {
                throw GoalsError.taskNotFound(id)
            }
            if current.isDeleted { return }
            try await transaction.execute(
                """
                UPDATE tasks SET deleted_at = \(now), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
        }
    }

    /// The user's live tasks of `week` and/or linked to `goalID` (a live goal of the user's), by week then creation,
    /// after the one at `after`.
    public func tasks(
        user userID: UUID, week: IsoWeek?, goal goalID: UUID?, after: (weekStart: LocalDate, sequence: Int64)?,
        limit: Int
    ) async throws -> [TaskRecord] {
        if let goalID { _ = try await liveGoal(pool, user: userID, id: goalID) }
        let weekStart = after?.weekStart ?? LocalDate(year: 1, month: 1, day: 1)!
        let sequence = after?.sequence ?? Int64.min
        return try await pool.query(
            """
            SELECT * FROM tasks WHERE user_id = \(userID) AND deleted_at IS NULL \
            AND (\(week?.monday as LocalDate?)::date IS NULL OR week_start = \(week?.monday as LocalDate?)) \
            AND (\(goalID as UUID?)::uuid IS NULL OR goal_id = \(goalID as UUID?)) \
            AND (week_start, created_seq) > (\(weekStart), \(sequence)) \
            ORDER BY week_start, created_seq LIMIT \(limit)
            """
        ).map(TaskRecord.init(row:))
    }

    /// A task of the user's, deleted ones included; `nil` when the user has none with that id.
    public func task(user userID: UUID, id: UUID) async throws -> TaskRecord? {
        try await task(pool, user: userID, id: id)
    }

    func task(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> TaskRecord? {
        try await database.queryRow("SELECT * FROM tasks WHERE user_id = \(userID) AND id = \(id)")
            .map(TaskRecord.init(row:))
    }

    /// A live task of the user's; deleted and unknown ids are ``GoalsError/taskNotFound(_:)``.
    func liveTask(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> TaskRecord {
        guard let task = try await task(database, user: userID, id: id), !task.isDeleted else {
            throw GoalsError.taskNotFound(id)
        }
        return task
    }

    /// A goal a task may link to: live and the user's (else NOT_FOUND), of a type that links tasks, and active or
    /// paused (not archived, not completed by hand).
    private func requireTaskLinkableGoal(_ transaction: PostgresTransaction, user userID: UUID, id goalID: UUID)
        async throws
    {
        let goal = try await liveGoal(transaction, user: userID, id: goalID)
        guard goal.type.linksTasks else { throw GoalsError.notLinkable(goal.type) }
        guard goal.state == .active || goal.state == .paused else {
            throw GoalsError.invalidTransition(goal: goalID, from: goal.state.rawValue, action: "link a task to")
        }
    }

    /// The days the user's linked tasks were completed, per goal, deleted tasks included (they keep what they gave).
    /// Tasks of a deleted goal are unlinked, so every goal here is live.
    func taskCompletions(user userID: UUID) async throws -> [UUID: [LocalDate]] {
        let rows = try await pool.query(
            """
            SELECT goal_id, completed_on FROM tasks WHERE user_id = \(userID) AND goal_id IS NOT NULL \
            AND completed_on IS NOT NULL ORDER BY completed_on
            """)
        var completions: [UUID: [LocalDate]] = [:]
        for row in rows {
            completions[try row.decode(0, as: UUID.self), default: []].append(try row.decode(1, as: LocalDate.self))
        }
        return completions
    }

    /// Unlinks every task of a goal being deleted (deleted tasks too): they stay, without a goal.
    func unlinkTasks(
        _ transaction: PostgresTransaction, user userID: UUID, goal goalID: UUID, sequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE tasks SET goal_id = NULL, updated_at = \(now), change_seq = \(sequence) \
            WHERE user_id = \(userID) AND goal_id = \(goalID)
            """)
    }
}

extension TaskRecord {
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("id"), title: try row.decode("title"),
            week: IsoWeek(containing: try row.decode("week_start", as: LocalDate.self)),
            goalID: try row.decode("goal_id"),
            completedOn: try row.decode("completed_on"), createdAt: try row.decode("created_at"),
            updatedAt: try row.decode("updated_at"), deletedAt: try row.decode("deleted_at"),
            changeSequence: try row.decode("change_seq"), createdSequence: try row.decode("created_seq"))
    }
}
