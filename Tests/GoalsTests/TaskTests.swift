import Foundation
import HabitFlowGoalsProtos
import HabitFlowRPC
import HabitFlowTestSupport
import Testing

typealias PlanningTask = Habitflow_Goals_V1_Task

func week(_ year: Int32, _ week: Int32) -> Habitflow_Goals_V1_IsoWeek {
    .with {
        $0.year = year
        $0.week = week
    }
}

func goalsDate(_ year: Int32, _ month: Int32, _ day: Int32) -> Habitflow_Goals_V1_LocalDate {
    .with {
        $0.year = year
        $0.month = month
        $0.day = day
    }
}

extension TestUser {
    func createTask(
        _ title: String, week planned: Habitflow_Goals_V1_IsoWeek, goal: Goal? = nil, id: String = ""
    ) async throws -> PlanningTask {
        try await goals.createTask(
            .with {
                $0.taskID = id
                $0.title = title
                $0.week = planned
                $0.goalID = goal?.id ?? ""
            }, options: options)
    }

    /// Completes a task on `day` (the user's today when nil).
    @discardableResult
    func complete(_ task: PlanningTask, on day: Habitflow_Goals_V1_LocalDate? = nil) async throws -> PlanningTask {
        try await goals.completeTask(
            .with {
                $0.taskID = task.id
                if let day { $0.date = day }
            }, options: options)
    }

    func tasks(week planned: Habitflow_Goals_V1_IsoWeek? = nil, goal: Goal? = nil) async throws -> [PlanningTask] {
        try await goals.listTasks(
            .with {
                if let planned { $0.week = planned }
                $0.goalID = goal?.id ?? ""
            }, options: options
        ).tasks
    }

    func deleteTask(_ task: PlanningTask) async throws {
        _ = try await goals.deleteTask(.with { $0.taskID = task.id }, options: options)
    }
}

/// Planning tasks linked to goals (seed 000 US4.2, US4.3, EC2, EC5; DESIGN.md 3a "What counts"), over real gRPC and
/// real Postgres.
@Suite struct TaskTests {
    /// US4.2: a completed linked task adds one to the week's check-ins of a weekly goal.
    @Test func aCompletedLinkedTaskAddsOneToAWeeklyGoal() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // Wednesday of 2026-W03
        let run = try await user.createHabit("Run")
        let goal = try await user.createGoal("Run 3 times", type: .weeklyHabit, target: 3, habits: [run])
        try await user.checkIn(run)
        let task = try await user.createTask("Sign up for the 10k", week: week(2026, 3), goal: goal)
        #expect(task.goalID == goal.id && !task.completed && !task.hasCompletedOn)
        #expect(try await user.goal(goal).progress.display == "1/3")
        let done = try await user.complete(task)
        #expect(done.completed && done.completedOn == goalsDate(2026, 1, 14))
        #expect(try await user.goal(goal).progress.display == "2/3")
        // Completing again changes nothing (the first day stays).
        let again = try await user.complete(task, on: goalsDate(2026, 1, 12))
        #expect(again.completedOn == goalsDate(2026, 1, 14))
        #expect(try await user.goal(goal).progress.display == "2/3")
    }

    /// US4.3: completed linked tasks add to a count goal's cumulative figure, each in its week.
    @Test func completedLinkedTasksAddToACountGoal() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let read = try await user.createHabit("Read")
        let goal = try await user.createGoal("Read 10 times", type: .count, target: 10, habits: [read])
        try await user.checkIn(read, times: 2)
        for title in ["Buy a book", "Join the club"] {
            try await user.complete(try await user.createTask(title, week: week(2026, 3), goal: goal))
        }
        #expect(try await user.goal(goal).progress.display == "4/10")
        try user.setNow("2026-01-21T12:00:00Z")  // 2026-W04
        try await user.complete(try await user.createTask("Library visit", week: week(2026, 4), goal: goal))
        let after = try await user.goal(goal)
        #expect(after.progress.display == "5/10")
        #expect(after.progress.thisWeekValue == 1)
        #expect(try await user.history(goal).map(\.cumulative) == [4, 5])
        // A quantity goal counts units: a task gives it nothing.
        let km = try await user.createHabit("Ride", unit: "km")
        let ride = try await user.createGoal("Ride 100 km", type: .quantity, target: 100, habits: [km], unit: "km")
        try await user.complete(try await user.createTask("Fix the bike", week: week(2026, 4), goal: ride))
        #expect(try await user.goal(ride).progress.display == "0/100 km")
    }

    @Test func aCompletedTaskMakesARecurringGoalDoneThisWeek() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let goal = try await user.createGoal("Weekly review", type: .recurringTask, target: 0)
        #expect(goal.progress.display == "Not done this week")
        try await user.complete(try await user.createTask("Review the week", week: week(2026, 3), goal: goal))
        let done = try await user.goal(goal)
        #expect(done.progress.display == "Done this week")
        #expect(done.progress.thisWeekMet)
    }

    /// A task counts in the week of the day it was completed, not the week it was planned for.
    @Test func aTaskCompletedLastWeekCountsInLastWeekOnly() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // 2026-W03
        let goal = try await user.createGoal("Call home 2 times", type: .weeklyHabit, target: 2) {
            $0.startDate = goalsDate(2026, 1, 5)
        }
        let task = try await user.createTask("Call mum", week: week(2026, 3), goal: goal)
        try await user.complete(task, on: goalsDate(2026, 1, 7))  // 2026-W02
        #expect(try await user.history(goal).map(\.value) == [1, 0])
        #expect(try await user.goal(goal).progress.display == "0/2")
    }

    /// EC5: deleting a completed linked task keeps what it gave; the task is gone from lists.
    @Test func aDeletedTaskKeepsWhatItGave() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let goal = try await user.createGoal("Ship 5 things", type: .count, target: 5)
        let task = try await user.createTask("Ship the app", week: week(2026, 3), goal: goal)
        try await user.complete(task)
        #expect(try await user.goal(goal).progress.display == "1/5")
        try await user.deleteTask(task)
        #expect(try await user.goal(goal).progress.display == "1/5")
        #expect(try await user.history(goal).map(\.value) == [1])
        #expect(try await user.tasks(week: week(2026, 3)).isEmpty)
        // Deleting again succeeds; the deleted task is NOT_FOUND for everything else.
        try await user.deleteTask(task)
        await expectError(.notFound) { try await user.complete(task) }
        // A replica without a cache derives the same.
        let replica = try await user.fixture.startReplica()
        defer { Task { await replica.shutdown() } }
        let fresh = GoalsClient(transport: try GoalsFixture.channel(to: replica.port, signedAs: "gateway"))
        #expect(try await fresh.getGoal(.with { $0.goalID = goal.id }, options: user.options).progress.display == "1/5")
    }

    /// EC2: deleting a goal keeps its tasks, unlinked, completed or not.
    @Test func aDeletedGoalUnlinksItsTasks() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let goal = try await user.createGoal("Learn Spanish", type: .count, target: 20)
        let done = try await user.createTask("Book a lesson", week: week(2026, 3), goal: goal)
        try await user.complete(done)
        let open = try await user.createTask("Buy a dictionary", week: week(2026, 3), goal: goal)
        #expect(try await user.tasks(goal: goal).map(\.id) == [done.id, open.id])
        _ = try await user.goals.deleteGoal(.with { $0.goalID = goal.id }, options: user.options)
        let kept = try await user.tasks(week: week(2026, 3))
        #expect(kept.map(\.id) == [done.id, open.id])
        #expect(kept.map(\.goalID) == ["", ""])
        #expect(kept.map(\.completed) == [true, false])
        await expectError(.notFound) { _ = try await user.goal(goal) }
        await expectError(.notFound) { _ = try await user.tasks(goal: goal) }
    }

    /// Uncompleting takes the contribution back; relinking moves it to the other goal.
    @Test func uncompletingAndRelinkingMoveTheContribution() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let first = try await user.createGoal("First", type: .weeklyHabit, target: 3)
        let second = try await user.createGoal("Second", type: .count, target: 10)
        let task = try await user.createTask("Plan", week: week(2026, 3), goal: first)
        try await user.complete(task)
        #expect(try await user.goal(first).progress.display == "1/3")
        let reopened = try await user.goals.uncompleteTask(.with { $0.taskID = task.id }, options: user.options)
        #expect(!reopened.completed && !reopened.hasCompletedOn)
        #expect(try await user.goal(first).progress.display == "0/3")
        try await user.complete(task)
        var update = Habitflow_Goals_V1_UpdateTaskRequest()
        update.task.id = task.id
        update.task.goalID = second.id
        update.task.title = "Plan the week"
        update.task.week = week(2026, 4)
        update.updateMask.paths = ["goal_id", "title", "week"]
        let moved = try await user.goals.updateTask(update, options: user.options)
        #expect(moved.goalID == second.id && moved.title == "Plan the week" && moved.week == week(2026, 4))
        #expect(moved.completed)
        #expect(try await user.goal(first).progress.display == "0/3")
        #expect(try await user.goal(second).progress.display == "1/10")
        update.task.goalID = ""
        update.updateMask.paths = ["goal_id"]
        #expect(try await user.goals.updateTask(update, options: user.options).goalID == "")
        #expect(try await user.goal(second).progress.display == "0/10")
    }

    @Test func aTaskLinksOnlyTheCallersActiveOrPausedGoals() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let other = try await TestUser()
        let theirs = try await other.createGoal("Theirs", type: .count, target: 5)
        await expectError(.notFound) { _ = try await user.createTask("Sneaky", week: week(2026, 3), goal: theirs) }
        let mine = try await user.createTask("Mine", week: week(2026, 3))
        var update = Habitflow_Goals_V1_UpdateTaskRequest()
        update.task.id = mine.id
        update.task.goalID = theirs.id
        update.updateMask.paths = ["goal_id"]
        await expectError(.notFound) { _ = try await user.goals.updateTask(update, options: user.options) }
        // Another user's task is NOT_FOUND too.
        await expectError(.notFound) { try await other.complete(mine) }
        let archived = try await user.createGoal("Old", type: .count, target: 5)
        _ = try await user.goals.archiveGoal(.with { $0.goalID = archived.id }, options: user.options)
        let refused = await expectError(.failedPrecondition) {
            _ = try await user.createTask("Late", week: week(2026, 3), goal: archived)
        }
        #expect(preconditionType(refused) == "GOAL_STATE")
        let finished = try await user.createGoal("Done", type: .count, target: 5)
        _ = try await user.goals.completeGoal(.with { $0.goalID = finished.id }, options: user.options)
        await expectError(.failedPrecondition) { _ = try await user.createTask("After", week: week(2026, 3), goal: finished) }
        let paused = try await user.createGoal("Resting", type: .count, target: 5)
        _ = try await user.goals.pauseGoal(.with { $0.goalID = paused.id }, options: user.options)
        #expect(try await user.createTask("Still fine", week: week(2026, 3), goal: paused).goalID == paused.id)
        let level = try await user.createGoal("Spanish", type: .level, target: 2) { $0.target.levels = ["A1", "A2"] }
        let notLinkable = await expectError(.failedPrecondition) {
            _ = try await user.createTask("Level up", week: week(2026, 3), goal: level)
        }
        #expect(preconditionType(notLinkable) == "NOT_LINKABLE")
    }

    @Test func aRepeatedCreateReturnsTheFirstTask() async throws {
        let user = try await TestUser()
        let id = UUID().uuidString.lowercased()
        let first = try await user.createTask("Once", week: week(2026, 3), id: id)
        let again = try await user.createTask("Once, retried", week: week(2026, 5), id: id)
        #expect(first.id == id && again.id == id)
        #expect(again.title == "Once" && again.week == week(2026, 3))
        #expect(try await user.tasks(week: week(2026, 3)).count == 1)
    }

    @Test func badTaskInputNamesTheFields() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let error = await expectError(.invalidArgument) {
            _ = try await user.goals.createTask(
                .with {
                    $0.taskID = "nope"
                    $0.title = "  "
                    $0.goalID = "also-nope"
                }, options: user.options)
        }
        #expect(Set(error?.fieldViolations.map(\.field) ?? []) == ["task_id", "title", "week", "goal_id"])
        await expectError(.invalidArgument, field: "week") {
            _ = try await user.createTask("Week 54", week: week(2026, 54))
        }
        await expectError(.invalidArgument, field: "title") {
            _ = try await user.createTask(String(repeating: "x", count: 201), week: week(2026, 3))
        }
        let task = try await user.createTask("Plan", week: week(2026, 3))
        await expectError(.invalidArgument, field: "date") { try await user.complete(task, on: goalsDate(2026, 1, 15)) }
        await expectError(.invalidArgument, field: "week") { _ = try await user.tasks() }
        await expectError(.invalidArgument, field: "update_mask.paths[0]") {
            _ = try await user.goals.updateTask(
                .with {
                    $0.task.id = task.id
                    $0.updateMask.paths = ["completed"]
                }, options: user.options)
        }
        await expectError(.invalidArgument, field: "task.title") {
            _ = try await user.goals.updateTask(
                .with {
                    $0.task.id = task.id
                    $0.updateMask.paths = ["title"]
                }, options: user.options)
        }
    }

    @Test func tasksListByWeekAndGoalInPages() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let goal = try await user.createGoal("Tidy", type: .count, target: 10)
        var created: [PlanningTask] = []
        for index in 1...3 { created.append(try await user.createTask("Task \(index)", week: week(2026, 3), goal: goal)) }
        let later = try await user.createTask("Later", week: week(2026, 4), goal: goal)
        let earlier = try await user.createTask("Earlier", week: week(2026, 2), goal: goal)
        _ = try await user.createTask("Unlinked", week: week(2026, 3))
        var seen: [String] = []
        var token = ""
        repeat {
            let page = try await user.goals.listTasks(
                .with {
                    $0.goalID = goal.id
                    $0.pageSize = 2
                    $0.pageToken = token
                }, options: user.options)
            seen += page.tasks.map(\.id)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(seen == [earlier.id] + created.map(\.id) + [later.id])
        #expect(try await user.tasks(week: week(2026, 3)).count == 4)
        #expect(try await user.tasks(week: week(2026, 3), goal: goal).map(\.id) == created.map(\.id))
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await user.goals.listTasks(
                .with {
                    $0.week = week(2026, 3)
                    $0.pageToken = "forged"
                }, options: user.options)
        }
    }

    @Test func tasksAreInTheChangeFeedAndTheExport() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let goal = try await user.createGoal("Garden", type: .count, target: 5)
        let kept = try await user.createTask("Plant", week: week(2026, 3), goal: goal)
        let gone = try await user.createTask("Weed", week: week(2026, 3))
        let first = try await user.goals.listChanges(.init(), options: user.options)
        #expect(first.changes.map(\.goal.id) == [goal.id, "", ""])
        #expect(first.changes.map(\.task.id) == ["", kept.id, gone.id])
        try await user.deleteTask(gone)
        _ = try await user.goals.deleteGoal(.with { $0.goalID = goal.id }, options: user.options)
        let next = try await user.goals.listChanges(.with { $0.cursor = first.nextCursor }, options: user.options)
        // The deleted task, then the goal's tombstone with its task unlinked (one write).
        #expect(next.changes.map(\.task.id) == [gone.id, "", kept.id])
        #expect(next.changes.map(\.deleted) == [true, true, false])
        #expect(next.changes.last?.task.goalID == "")
        let exported = try await user.fixture.goalsInternal.exportUser(.with { $0.userID = user.userID })
        #expect(exported.tasks.map(\.id) == [kept.id, gone.id])
        #expect(exported.tasks.map(\.deleted) == [false, true])
        // Removing the account removes its tasks with its goals.
        _ = try await user.createTask("Linked to a live goal", week: week(2026, 3), goal: try await user.createGoal(
            "Live", type: .count, target: 5))
        #expect(try await user.fixture.goalsInternal.purgeUser(.with { $0.userID = user.userID }).existed)
        await expectError(.failedPrecondition) { try await user.complete(kept) }
    }
}
