import Foundation
import HabitFlowCalendar
import HabitFlowGoals
import HabitFlowGoalsProtos
import HabitFlowRPC
import HabitFlowTestSupport
import Testing

extension TestUser {
    func planningView(
        week planned: Habitflow_Goals_V1_IsoWeek? = nil, horizon: Habitflow_Goals_V1_Horizon = .unspecified
    ) async throws -> Habitflow_Goals_V1_PlanningView {
        try await goals.getPlanningView(
            .with {
                if let planned { $0.week = planned }
                $0.horizon = horizon
            }, options: options)
    }

    func suggestions(week planned: Habitflow_Goals_V1_IsoWeek? = nil) async throws -> [Habitflow_Goals_V1_Suggestion] {
        try await goals.listSuggestions(.with { if let planned { $0.week = planned } }, options: options).suggestions
    }

    func prompts(_ section: Habitflow_Goals_V1_PromptSection = .unspecified) async throws
        -> Habitflow_Goals_V1_ListReflectionPromptsResponse
    {
        try await goals.listReflectionPrompts(.with { $0.section = section }, options: options)
    }
}

/// Planning views (seed 004 PLN-001..PLN-007), "Based on your goals" suggestions (seed 000 US7, FR-028, FR-029) and
/// reflection prompts (seed 004 REF-001..REF-005), over real gRPC and real Postgres.
@Suite struct PlanningTests {
    /// PLN-001/006/007: a week's plan holds the goals of every horizon the week belongs to, longest first, each with
    /// its breadcrumb (root first) and children.
    @Test func aWeeksPlanHasEveryHorizonLongestFirstWithBreadcrumbs() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // Wednesday of 2026-W03
        let run = try await user.createHabit("Run")
        let fit = try await user.createGoal("Be fit at 40", type: .count, target: 1000, horizon: .fiveYears)
        let half = try await user.createGoal("Run a half marathon", type: .count, target: 36, horizon: .twelveWeeks) {
            $0.parentGoalID = fit.id
        }
        let thrice = try await user.createGoal(
            "Run 3 times", type: .weeklyHabit, target: 3, horizon: .oneWeek, habits: [run]
        ) { $0.parentGoalID = half.id }
        try await user.checkIn(run)

        let view = try await user.planningView()
        #expect(view.week == week(2026, 3))
        #expect(view.goals.map(\.goal.id) == [fit.id, half.id, thrice.id])
        #expect(view.goals.map(\.ancestorIds) == [[], [fit.id], [fit.id, half.id]])
        #expect(view.goals.map(\.childIds) == [[half.id], [thrice.id], []])
        // PLN-005: progress as ListGoals gives it.
        #expect(view.goals[2].goal.progress.display == "1/3")
        #expect(view.goals[2].goal.status == .inProgress)
        #expect(view.goals[2].goal == (try await user.list()).first { $0.id == thrice.id })

        // One horizon: the other goals stay out, the breadcrumb and children stay.
        let twelve = try await user.planningView(week: week(2026, 3), horizon: .twelveWeeks)
        #expect(twelve.goals.map(\.goal.id) == [half.id])
        #expect(twelve.goals[0].ancestorIds == [fit.id] && twelve.goals[0].childIds == [thrice.id])

        // The next week: the 1-week goal has ended; its parent still lists it as a child.
        let next = try await user.planningView(week: week(2026, 4))
        #expect(next.goals.map(\.goal.id) == [fit.id, half.id])
        #expect(next.goals[1].childIds == [thrice.id])
        // Before any of them started: nothing.
        #expect(try await user.planningView(week: week(2026, 2)).goals.isEmpty)
        // The 12-week goal's last week is 2026-W14; the 5-year goal goes on.
        #expect(try await user.planningView(week: week(2026, 14)).goals.map(\.goal.id) == [fit.id, half.id])
        #expect(try await user.planningView(week: week(2026, 15)).goals.map(\.goal.id) == [fit.id])
    }

    /// A goal that had not started by the week or had ended before it is absent; so is an archived goal.
    @Test func goalsOutsideTheWeekAndArchivedOnesAreAbsent() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let earlier = try await user.createGoal("Sort the garage", type: .count, target: 5, horizon: .fourWeeks) {
            $0.startDate = goalsDate(2025, 12, 10)  // 2025-W50, so its weeks are 2025-W50..2026-W01
        }
        let ongoing = try await user.createGoal("Read more", type: .count, target: 50)
        let archived = try await user.createGoal("Learn Go", type: .count, target: 10, horizon: .twelveWeeks)
        _ = try await user.goals.archiveGoal(.with { $0.goalID = archived.id }, options: user.options)

        #expect(try await user.planningView().goals.map(\.goal.id) == [ongoing.id])
        #expect(try await user.planningView(week: week(2026, 1)).goals.map(\.goal.id) == [earlier.id])
        #expect(try await user.planningView(week: week(2025, 50)).goals.map(\.goal.id) == [earlier.id])
        #expect(try await user.planningView(week: week(2025, 49)).goals.isEmpty)
        // Ongoing first, then 12 weeks, ... : horizon order beats list order.
        let weekly = try await user.createGoal("Walk daily", type: .weeklyHabit, target: 7, horizon: .oneWeek)
        let quarter = try await user.createGoal("Write a talk", type: .count, target: 3, horizon: .twelveWeeks)
        #expect(try await user.planningView().goals.map(\.goal.id) == [ongoing.id, quarter.id, weekly.id])
    }

    /// US7.1: a weekly goal with a target of 3 linked to two habits, one checked in once this week and one three
    /// times: one suggestion, for the habit 2 short.
    @Test func us7_1_habitsShortOfAWeeklyTargetAreSuggested() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let run = try await user.createHabit("Run")
        let swim = try await user.createHabit("Swim")
        let goal = try await user.createGoal("Move 3 times", type: .weeklyHabit, target: 3, habits: [run, swim])
        try await user.checkIn(run)
        try await user.checkIn(swim, times: 3)

        let suggestions = try await user.suggestions()
        #expect(suggestions.count == 1)
        let suggestion = try #require(suggestions.first)
        #expect(suggestion.goalID == goal.id && suggestion.goalTitle == "Move 3 times")
        #expect(suggestion.shortfall == 2)
        #expect(suggestion.habit.habitID == run.id && suggestion.habit.habitName == "Run")
        #expect(suggestion.habit.checkIns == 1 && suggestion.habit.target == 3)
        #expect(suggestion.text == "Run: 2 more this week for Move 3 times")
        // Once the habit reaches the target, nothing is left to suggest.
        try await user.checkIn(run, times: 2)
        #expect(try await user.suggestions().isEmpty)
    }

    /// US7.2: a recurring goal not done this week is a reminder to schedule it; done, it is gone.
    @Test func us7_2_aRecurringGoalNotDoneIsAReminder() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let goal = try await user.createGoal("Weekly review", type: .recurringTask, target: 0)
        let suggestions = try await user.suggestions()
        #expect(suggestions.count == 1)
        #expect(suggestions.first?.kind == .recurring(Habitflow_Goals_V1_RecurringSuggestion()))
        #expect(suggestions.first?.goalID == goal.id && suggestions.first?.shortfall == 1)
        #expect(suggestions.first?.text == "Schedule Weekly review this week")
        try await user.complete(try await user.createTask("Review the week", week: week(2026, 3), goal: goal))
        #expect(try await user.suggestions().isEmpty)
        // Next week it is due again.
        try user.setNow("2026-01-21T12:00:00Z")
        #expect(try await user.suggestions().map(\.goalID) == [goal.id])
        // Last week's list has nothing: it was done.
        #expect(try await user.suggestions(week: week(2026, 3)).isEmpty)
    }

    /// Most behind first: the largest shortfall, then the goals' list order, then the habit's name; a paused goal
    /// suggests nothing.
    @Test func suggestionsAreMostBehindFirst() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let walk = try await user.createHabit("Walk")
        let read = try await user.createHabit("Read")
        let run = try await user.createHabit("Run")
        let aerobics = try await user.createHabit("Aerobics")
        let calm = try await user.createGoal("Calm 2 times", type: .weeklyHabit, target: 2, habits: [walk, read])
        let fit = try await user.createGoal("Run 5 times", type: .weeklyHabit, target: 5, habits: [run])
        let review = try await user.createGoal("Weekly review", type: .recurringTask, target: 0)
        let move = try await user.createGoal("Move 2 times", type: .weeklyHabit, target: 2, habits: [aerobics])
        try await user.checkIn(run)

        let suggestions = try await user.suggestions()
        #expect(suggestions.map(\.shortfall) == [4, 2, 2, 2, 1])
        #expect(suggestions.map(\.goalID) == [fit.id, calm.id, calm.id, move.id, review.id])
        #expect(suggestions.map(\.habit.habitName) == ["Run", "Read", "Walk", "Aerobics", ""])
        #expect(suggestions[0].text == "Run: 4 more this week for Run 5 times")

        // A paused goal suggests nothing; resumed, it is back.
        _ = try await user.goals.pauseGoal(.with { $0.goalID = fit.id }, options: user.options)
        #expect(try await user.suggestions().map(\.goalID) == [calm.id, calm.id, move.id, review.id])
        _ = try await user.goals.resumeGoal(.with { $0.goalID = fit.id }, options: user.options)
        #expect(try await user.suggestions().first?.goalID == fit.id)
        // A goal completed by hand, or archived, suggests nothing either.
        _ = try await user.goals.completeGoal(.with { $0.goalID = review.id }, options: user.options)
        _ = try await user.goals.archiveGoal(.with { $0.goalID = move.id }, options: user.options)
        #expect(try await user.suggestions().map(\.goalID) == [fit.id, calm.id, calm.id])
    }

    /// A past week's suggestions come from that week's check-ins and target.
    @Test func aPastWeeksSuggestionsUseThatWeeksCheckIns() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let run = try await user.createHabit("Run")
        let goal = try await user.createGoal("Run 3 times", type: .weeklyHabit, target: 3, habits: [run]) {
            $0.startDate = goalsDate(2026, 1, 5)
        }
        try await user.checkIn(run, on: date(2026, 1, 6), times: 2)  // 2026-W02
        try await user.checkIn(run, times: 3)  // this week: met
        #expect(try await user.suggestions().isEmpty)
        let last = try await user.suggestions(week: week(2026, 2))
        #expect(last.map(\.goalID) == [goal.id])
        #expect(last.first?.shortfall == 1)
        #expect(last.first?.text == "Run: 1 more in 2026-W02 for Run 3 times")
        // Before the goal started: nothing.
        #expect(try await user.suggestions(week: week(2026, 1)).isEmpty)
    }

    /// REF-001..REF-005: both sections, Planning first, filterable, with stable ids and a version.
    @Test func reflectionPromptsHaveTwoSectionsStableIdsAndAVersion() async throws {
        let user = try await TestUser()
        let all = try await user.prompts()
        #expect(all.version == "2026-11-1")
        #expect(all.prompts.count == 12)
        #expect(Set(all.prompts.map(\.id)).count == all.prompts.count)
        #expect(all.prompts.prefix(6).allSatisfy { $0.section == .planning })
        #expect(all.prompts.suffix(6).allSatisfy { $0.section == .review })
        #expect(all.prompts.first?.id == "planning-good-week")
        #expect(all.prompts.first?.text == "What would make this week a good week?")
        #expect(all.prompts.contains { $0.id == "review-moved-most" && $0.section == .review })
        let review = try await user.prompts(.review)
        #expect(review.version == all.version)
        #expect(review.prompts == Array(all.prompts.suffix(6)))
        #expect(try await user.prompts(.planning).prompts == Array(all.prompts.prefix(6)))
        // The same list every time.
        #expect(try await user.prompts() == all)
    }

    @Test func badInputNamesTheField() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // 2026-W03: 520 weeks later is 2036-W01
        #expect(try await user.planningView(week: week(2036, 1)).week == week(2036, 1))
        await expectError(.invalidArgument, field: "week") { _ = try await user.planningView(week: week(2036, 2)) }
        await expectError(.invalidArgument, field: "week") { _ = try await user.planningView(week: week(2026, 54)) }
        await expectError(.invalidArgument, field: "horizon") {
            _ = try await user.planningView(horizon: .UNRECOGNIZED(42))
        }
        await expectError(.invalidArgument, field: "week") { _ = try await user.suggestions(week: week(2026, 4)) }
        await expectError(.invalidArgument, field: "week") { _ = try await user.suggestions(week: week(2026, 0)) }
        await expectError(.invalidArgument, field: "section") { _ = try await user.prompts(.UNRECOGNIZED(9)) }
    }
}

/// `GoalSuggestions` on its own: what it leaves out and how it orders, without a service.
@Suite struct SuggestionRulesTests {
    let user = UUID()
    let partner = UUID()
    let thisWeek = IsoWeek(year: 2026, week: 3)!

    func goal(_ title: String, _ type: GoalType, target: Double, sequence: Int64, state: GoalState = .active)
        -> GoalRecord
    {
        GoalRecord(
            id: UUID(), ownerID: user, title: title, description: "", icon: "", categoryID: nil, type: type,
            horizon: .ongoing, unit: nil, levels: nil, ratingScale: nil, parentGoalID: nil,
            startDate: thisWeek.adding(weeks: -1).monday, endDate: nil, targetDate: nil, conversationID: "",
            shared: false, state: state, createdAt: Date(), updatedAt: Date(), deletedAt: nil, changeSequence: sequence,
            createdSequence: sequence, targets: [TargetPeriod(weekStart: thisWeek.adding(weeks: -1).monday, value: target)])
    }

    func link(_ goal: GoalRecord, _ habit: HabitInfo, owner: UUID? = nil, until: LocalDate? = nil) -> GoalLinkRecord {
        GoalLinkRecord(
            goalID: goal.id, habitID: habit.id, habitUserID: owner ?? user, linkedFrom: goal.startDate,
            linkedUntil: until, habitDeleted: false)
    }

    @Test func leavesOutOthersHabitsEndedLinksAndInactiveGoalsAndOrdersByShortfallGoalName() {
        let habits = ["Walk", "read", "Run", "Theirs", "Old"].map {
            HabitInfo(id: UUID(), name: $0, unit: nil, categoryID: nil, deleted: false)
        }
        let calm = goal("Calm", .weeklyHabit, target: 2, sequence: 1)
        let fit = goal("Fit", .weeklyHabit, target: 4, sequence: 2)
        let paused = goal("Paused", .weeklyHabit, target: 9, sequence: 3, state: .paused)
        let review = goal("Review", .recurringTask, target: 0, sequence: 4)
        let links: [UUID: [GoalLinkRecord]] = [
            calm.id: [link(calm, habits[0]), link(calm, habits[1])],
            fit.id: [
                link(fit, habits[2]), link(fit, habits[3], owner: partner),
                link(fit, habits[4], until: thisWeek.adding(weeks: -1).sunday),
            ],
            paused.id: [link(paused, habits[2])],
            review.id: [link(review, habits[4])],
        ]
        var entries = EntryTotals()
        entries.replace(habitID: habits[2].id, weekStart: thisWeek.monday, count: 1, sum: 1)
        // Last week: the recurring goal's habit had an entry then, not this week.
        entries.replace(habitID: habits[4].id, weekStart: thisWeek.adding(weeks: -1).monday, count: 1, sum: 1)
        let statuses: [UUID: GoalStatus] = [
            calm.id: .notStarted, fit.id: .inProgress, paused.id: .paused, review.id: .inProgress,
        ]
        let suggestions = GoalSuggestions.suggestions(
            for: thisWeek, currentWeek: thisWeek, user: user, goals: [calm, fit, paused, review], statuses: statuses,
            links: links, taskCompletions: [:], entries: entries,
            habits: Dictionary(uniqueKeysWithValues: habits.map { ($0.id, $0) }))
        #expect(suggestions.map(\.goalTitle) == ["Fit", "Calm", "Calm", "Review"])
        #expect(suggestions.map(\.shortfall) == [3, 2, 2, 1])
        #expect(suggestions.map(\.text) == [
            "Run: 3 more this week for Fit", "read: 2 more this week for Calm", "Walk: 2 more this week for Calm",
            "Schedule Review this week",
        ])
        // Last week the recurring goal was done (its habit had an entry).
        let lastWeek = GoalSuggestions.suggestions(
            for: thisWeek.adding(weeks: -1), currentWeek: thisWeek, user: user, goals: [review], statuses: statuses,
            links: links, taskCompletions: [:], entries: entries, habits: [:])
        #expect(lastWeek.isEmpty)
        // A task completed this week makes it done too.
        let withTask = GoalSuggestions.suggestions(
            for: thisWeek, currentWeek: thisWeek, user: user, goals: [review], statuses: statuses, links: links,
            taskCompletions: [review.id: [thisWeek.monday.adding(days: 2)]], entries: entries, habits: [:])
        #expect(withTask.isEmpty)
    }
}
