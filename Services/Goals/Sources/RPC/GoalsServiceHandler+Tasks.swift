internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// Planning tasks (seed 000; DESIGN.md section 3 "Links and tasks"). A completed linked task moves its goal through
/// the snapshot's derivation (`GoalsStore.userGoals` loads the completions), so nothing here touches progress.
extension GoalsServiceHandler {
    static let updatableTaskPaths = ["title", "week", "goal_id"]

    func createTask(
        request: Habitflow_Goals_V1_CreateTaskRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Task {
        var validator = RequestValidator()
        let id = validator.clientID(request.taskID, field: "task_id")
        let title = validator.name(request.title, field: "title", maximumLength: TaskRules.maximumTitleLength)
        let week = validator.requiredWeek(request.hasWeek ? request.week : nil, field: "week")
        let goalID = validator.optionalID(request.goalID, field: "goal_id")
        try validator.check()
        let user = try await caller()
        return try await store.createTask(
            user: user.id, NewTask(id: id ?? UUID.random(), title: title, week: week, goalID: goalID), now: clock.now
        ).proto
    }

    func updateTask(
        request: Habitflow_Goals_V1_UpdateTaskRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Task {
        var validator = RequestValidator()
        let id = validator.id(request.task.id, field: "task.id")
        let paths = request.updateMask.paths
        let updatable = Self.updatableTaskPaths.joined(separator: ", ")
        if paths.isEmpty { validator.reject("update_mask", "is required: name the fields to change (\(updatable))") }
        for (index, path) in paths.enumerated() where !Self.updatableTaskPaths.contains(path) {
            validator.reject(
                "update_mask.paths[\(index)]",
                ["completed", "completed_on"].contains(path)
                    ? "\(path) changes through CompleteTask and UncompleteTask"
                    : "\(path) is not a field UpdateTask changes (\(updatable))")
        }
        let task = request.task
        var changes = TaskChanges()
        for path in Set(paths) {
            switch path {
            case "title":
                changes.title = validator.name(
                    task.title, field: "task.title", maximumLength: TaskRules.maximumTitleLength)
            case "week":
                changes.week = validator.requiredWeek(task.hasWeek ? task.week : nil, field: "task.week")
            case "goal_id": changes.goalID = .some(validator.optionalID(task.goalID, field: "task.goal_id"))
            default: break
            }
        }
        try validator.check()
        let user = try await caller()
        return try await store.updateTask(user: user.id, id: id, changes: changes, now: clock.now).proto
    }

    func completeTask(
        request: Habitflow_Goals_V1_CompleteTaskRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Task {
        var validator = RequestValidator()
        let id = validator.id(request.taskID, field: "task_id")
        try validator.check()
        let user = try await caller()
        let day = request.hasDate ? validator.pastDate(request.date, field: "date", today: user.today) : user.today
        try validator.check()
        return try await store.setTaskCompletion(user: user.id, id: id, on: day, now: clock.now).proto
    }

    func uncompleteTask(
        request: Habitflow_Goals_V1_UncompleteTaskRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Task {
        var validator = RequestValidator()
        let id = validator.id(request.taskID, field: "task_id")
        try validator.check()
        let user = try await caller()
        return try await store.setTaskCompletion(user: user.id, id: id, on: nil, now: clock.now).proto
    }

    func deleteTask(
        request: Habitflow_Goals_V1_DeleteTaskRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_DeleteTaskResponse {
        var validator = RequestValidator()
        let id = validator.id(request.taskID, field: "task_id")
        try validator.check()
        let user = try await caller()
        try await store.deleteTask(user: user.id, id: id, now: clock.now)
        return Habitflow_Goals_V1_DeleteTaskResponse()
    }

    func listTasks(
        request: Habitflow_Goals_V1_ListTasksRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListTasksResponse {
        var validator = RequestValidator()
        let week = request.hasWeek ? validator.week(request.week, field: "week") : nil
        let goalID = validator.optionalID(request.goalID, field: "goal_id")
        if !request.hasWeek, request.goalID.isEmpty { validator.reject("week", "is required when goal_id is empty") }
        let pageSize = validator.pageSize(request.pageSize, rule: Self.taskPageSizes)
        // The token names the filter, so it cannot continue another list.
        let listName = "tasks:\(week.map { String($0.monday.daysSinceEpoch) } ?? ""):\(goalID?.lowercasedString ?? "")"
        let after = validator.datedPosition(request.pageToken, list: listName)
            .map { (weekStart: $0.date, sequence: $0.sequence) }
        try validator.check()
        let user = try await caller()
        let tasks = try await store.tasks(user: user.id, week: week, goal: goalID, after: after, limit: pageSize + 1)
        return .with {
            let page = tasks.prefix(pageSize)
            $0.tasks = page.map(\.proto)
            if tasks.count > pageSize, let last = page.last {
                $0.nextPageToken = DatedPosition(date: last.week.monday, sequence: last.createdSequence).token(list: listName)
            }
        }
    }
}
