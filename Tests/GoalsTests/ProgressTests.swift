import Foundation
import HabitFlowGoalsProtos
import HabitFlowRPC
import HabitFlowHabitsProtos
import HabitFlowTestSupport
import Testing

/// Seed 000's acceptance scenarios and DESIGN.md 3a's progress rules, over real gRPC and real Postgres.
@Suite struct ProgressTests {
    @Test func weeklyHabitThreeOfFiveIsSixtyPercent() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // Wednesday of 2026-W03
        let run = try await user.createHabit("Run")
        let goal = try await user.createGoal("Run 5 times", type: .weeklyHabit, target: 5, habits: [run])
        #expect(goal.status == .notStarted)
        try await user.checkIn(run, on: date(2026, 1, 12))
        try await user.checkIn(run, on: date(2026, 1, 13))
        try await user.checkIn(run, on: date(2026, 1, 14))
        let progress = try await user.goal(goal).progress
        #expect(progress.display == "3/5")
        #expect(progress.percent == 60)
        #expect(progress.value == 3 && progress.target == 5)
        #expect(!progress.thisWeekMet)
        #expect(try await user.goal(goal).status == .inProgress)
    }

    @Test func countSeventyFiveOfHundredIsSeventyFivePercent() async throws {
        let user = try await TestUser()
        try user.setNow("2026-03-20T12:00:00Z")
        let pages = try await user.createHabit("Read 10 pages")
        let goal = try await user.createGoal("Read 100 times", type: .count, target: 100, habits: [pages]) {
            $0.startDate = .with {
                $0.year = 2026
                $0.month = 1
                $0.day = 1
            }
        }
        // 75 check-ins from January 1 (the goal's first week starts on Monday 2025-12-29).
        try await user.importEntries(pages, dates: (1...31).map { date(2026, 1, $0) } + (1...28).map { date(2026, 2, $0) }
            + (1...16).map { date(2026, 3, $0) })
        let progress = try await user.goal(goal).progress
        #expect(progress.display == "75/100")
        #expect(progress.percent == 75)
        #expect(try await user.goal(goal).status == .inProgress)
    }

    @Test func weeklyResetAtTheUsersMondayInTheirZone() async throws {
        let user = try await TestUser()
        try await user.setTimeZone("America/New_York")
        // Sunday 2026-01-18, 23:30 in New York (04:30 UTC on Monday).
        try user.setNow("2026-01-19T04:30:00Z")
        let walk = try await user.createHabit("Walk")
        let goal = try await user.createGoal("Walk 3 times", type: .weeklyHabit, target: 3, habits: [walk]) {
            $0.startDate = .with {
                $0.year = 2026
                $0.month = 1
                $0.day = 12
            }
        }
        try await user.checkIn(walk, times: 3)  // today: Sunday in New York
        #expect(try await user.goal(goal).progress.display == "3/3")
        // 00:30 on Monday in New York: a new week, nothing yet; the last one stays met.
        try user.setNow("2026-01-19T05:30:00Z")
        let monday = try await user.goal(goal)
        #expect(monday.progress.display == "0/3")
        #expect(monday.progress.weeksMet == 1)
        #expect(monday.progress.overallPercent == 100)
        let weeks = try await user.history(goal)
        #expect(weeks.map(\.met) == [true, false])
        #expect(weeks.map(\.value) == [3, 0])
    }

    @Test func targetChangeAppliesFromTheCurrentWeekOnly() async throws {
        let user = try await TestUser()
        try user.setNow("2026-02-04T12:00:00Z")  // 2026-W06
        let swim = try await user.createHabit("Swim")
        let goal = try await user.createGoal("Swim", type: .weeklyHabit, target: 2, habits: [swim]) {
            $0.startDate = .with {
                $0.year = 2026
                $0.month = 1
                $0.day = 19
            }
        }
        try await user.importEntries(swim, dates: [date(2026, 1, 20), date(2026, 1, 21), date(2026, 1, 27)])
        var update = Habitflow_Goals_V1_UpdateGoalRequest()
        update.goal.id = goal.id
        update.goal.target.value = 4
        update.updateMask.paths = ["target"]
        let updated = try await user.goals.updateGoal(update, options: user.options)
        #expect(updated.target.value == 4)
        #expect(updated.targetHistory.map(\.value) == [2, 4])
        let weeks = try await user.history(goal)
        // W04: 2/2 met, W05: 1/2, W06 (current): target 4.
        #expect(weeks.map(\.target) == [2, 2, 4])
        #expect(weeks.map(\.met) == [true, false, false])
    }

    @Test func aDeletedHabitKeepsWhatItGave() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let yoga = try await user.createHabit("Yoga")
        let goal = try await user.createGoal("Yoga 20 times", type: .count, target: 20, habits: [yoga])
        try await user.checkIn(yoga, on: date(2026, 1, 12), times: 2)
        _ = try await user.habits.deleteHabit(.with { $0.habitID = yoga.id }, options: user.options)
        // HabitDeleted reaches goals through habits' outbox.
        #expect(try await eventually { try await user.goal(goal).links.first?.hasLinkedUntil == true })
        let after = try await user.goal(goal)
        #expect(after.progress.display == "2/20")
        #expect(after.links.first?.habitDeleted == true)
    }

    @Test func aLinkAddedLaterDoesNotCountEarlierWeeks() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-07T12:00:00Z")  // 2026-W02
        let pushups = try await user.createHabit("Push-ups")
        let goal = try await user.createGoal("Push-ups 50 times", type: .count, target: 50)
        #expect(goal.progress.display == "0/50")
        try await user.checkIn(pushups, on: date(2026, 1, 6), times: 3)
        try user.setNow("2026-01-14T12:00:00Z")  // 2026-W03
        try await user.checkIn(pushups, times: 2)
        let linked = try await user.link(pushups, to: goal)
        #expect(linked.progress.display == "2/50")
        #expect(try await user.history(goal).map(\.value) == [0, 2])
        // Unlinking keeps what the habit gave through the week it was removed.
        let unlinked = try await user.unlink(pushups, from: goal)
        #expect(unlinked.progress.display == "2/50")
        try user.setNow("2026-01-21T12:00:00Z")
        try await user.checkIn(pushups, times: 4)
        #expect(try await user.goal(goal).progress.display == "2/50")
    }

    @Test func quantityGoalsSumValuesInOneUnit() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let run = try await user.createHabit("Run", unit: "km")
        let pages = try await user.createHabit("Pages", unit: "pages")
        let goal = try await user.createGoal("Run 500 km", type: .quantity, target: 500, habits: [run], unit: "km")
        try await user.checkIn(run, value: 12.5)
        try await user.checkIn(run, value: 30)
        #expect(try await user.goal(goal).progress.display == "42.5/500 km")
        let mismatch = await expectError(.failedPrecondition) { _ = try await user.link(pages, to: goal) }
        #expect(mismatch?.message.contains("km") == true)
        // While linked, habits refuses to change the run's unit; after unlinking it allows it.
        var update = Habitflow_Habits_V1_UpdateHabitRequest()
        update.habit.id = run.id
        update.habit.unit = "miles"
        update.updateMask.paths = ["unit"]
        let refused = await expectError(.failedPrecondition) {
            _ = try await user.habits.updateHabit(update, options: user.options)
        }
        #expect(refused?.errorReason == "HABIT_UNIT_IN_USE" || preconditionType(refused) == "HABIT_UNIT_IN_USE")
        _ = try await user.unlink(run, from: goal)
        let changed = try await user.habits.updateHabit(update, options: user.options)
        #expect(changed.unit == "miles")
    }

    @Test func countGoalCompletesAtOneHundredPercent() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let meditate = try await user.createHabit("Meditate")
        let goal = try await user.createGoal("Meditate 3 times", type: .count, target: 3, habits: [meditate])
        try await user.checkIn(meditate, times: 2)
        #expect(try await user.goal(goal).status == .inProgress)
        try await user.checkIn(meditate)
        let done = try await user.goal(goal)
        #expect(done.status == .completed)
        #expect(done.progress.percent == 100)
        #expect(done.state == .active)
        // Over the target: the figure is not capped, the percentage is.
        try await user.checkIn(meditate)
        #expect(try await user.goal(goal).progress.display == "4/3")
        #expect(try await user.goal(goal).progress.percent == 100)
    }

    @Test func weeklyGoalsEndByTheEightyPercentRule() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-05T12:00:00Z")  // Monday of 2026-W02
        let stretch = try await user.createHabit("Stretch")
        let kept = try await user.createGoal("Stretch daily", type: .weeklyHabit, target: 1, horizon: .fourWeeks,
            habits: [stretch])
        let other = try await user.createHabit("Journal")
        let missed = try await user.createGoal("Journal", type: .weeklyHabit, target: 1, horizon: .fourWeeks,
            habits: [other])
        #expect(kept.endDate == .with {
            $0.year = 2026
            $0.month = 2
            $0.day = 1
        })
        // Stretch met 4 weeks of 4 (≥ 80 %), Journal 3 of 4 (75 %).
        try await user.importEntries(stretch, dates: [date(2026, 1, 5), date(2026, 1, 12), date(2026, 1, 19), date(2026, 1, 26)])
        try await user.importEntries(other, dates: [date(2026, 1, 5), date(2026, 1, 12), date(2026, 1, 19)])
        try user.setNow("2026-02-02T12:00:00Z")
        #expect(try await user.goal(kept).status == .completed)
        let expired = try await user.goal(missed)
        #expect(expired.status == .expired)
        #expect(expired.progress.weeksMet == 3 && expired.progress.weeksTotal == 4)
        // Ended goals hold no slot and leave the active dashboard list.
        let active = try await user.fixture.goalsInternal.listActiveGoals(.with { $0.userID = user.userID })
        #expect(active.goals.isEmpty)
    }

    @Test func levelAndRatingGoalsShowTheLatestAssessment() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let spanish = try await user.createGoal("Spanish", type: .level, target: 3) {
            $0.target.levels = ["A1", "A2", "B1", "B2"]
        }
        #expect(spanish.progress.display == "Not assessed yet (0/3)")
        for (day, level) in [(Int32(10), Int32(1)), (12, 2)] {
            _ = try await user.goals.addAssessment(
                .with {
                    $0.goalID = spanish.id
                    $0.value = level
                    $0.date = .with {
                        $0.year = 2026
                        $0.month = 1
                        $0.day = day
                    }
                }, options: user.options)
        }
        let progress = try await user.goal(spanish).progress
        #expect(progress.display == "A2 (2/3)")
        #expect(progress.currentLevel == "A2")
        #expect(progress.percent == 66)
        await expectError(.invalidArgument, field: "value") {
            _ = try await user.goals.addAssessment(
                .with {
                    $0.goalID = spanish.id
                    $0.value = 5
                }, options: user.options)
        }
        let sleep = try await user.createGoal("Sleep well", type: .rating, target: 4) { $0.target.ratingScale = 5 }
        _ = try await user.goals.addAssessment(
            .with {
                $0.goalID = sleep.id
                $0.value = 4
            }, options: user.options)
        #expect(try await user.goal(sleep).status == .completed)
    }

    /// Nothing of progress is stored: a replica with no cache derives every figure and every past week the same.
    @Test func everyFigureSurvivesDroppingTheCaches() async throws {
        let user = try await TestUser()
        try user.setNow("2026-02-11T12:00:00Z")
        let run = try await user.createHabit("Run", unit: "km")
        let read = try await user.createHabit("Read")
        let start = Habitflow_Goals_V1_LocalDate.with {
            $0.year = 2026
            $0.month = 1
            $0.day = 5
        }
        _ = try await user.createGoal("Read weekly", type: .weeklyHabit, target: 2, habits: [read]) { $0.startDate = start }
        _ = try await user.createGoal("Run 100 km", type: .quantity, target: 100, habits: [run], unit: "km") {
            $0.startDate = start
        }
        let count = try await user.createGoal("Read 30 times", type: .count, target: 30) { $0.startDate = start }
        try await user.importEntries(read, dates: (5...31).map { date(2026, 1, $0) })
        try await user.importEntries(run, dates: [date(2026, 1, 6), date(2026, 1, 20), date(2026, 2, 3)], value: 7.5)
        _ = try await user.link(read, to: count)
        let cached = try await user.list()
        let replica = try await user.fixture.startReplica()
        defer { Task { await replica.shutdown() } }
        let fresh = GoalsClient(transport: try GoalsFixture.channel(to: replica.port, signedAs: "gateway"))
        let uncached = try await fresh.listGoals(.init(), options: user.options).goals
        #expect(cached == uncached)
        for goal in cached {
            let cachedWeeks = try await user.history(goal)
            let freshWeeks = try await fresh.getGoalHistory(.with { $0.goalID = goal.id }, options: user.options).weeks
            #expect(cachedWeeks == freshWeeks)
            #expect(cachedWeeks.count == 6)
        }
    }
}

/// After a read, a check-in (or its removal) reaches the cached progress as the changed weeks only.
@Suite struct CachedProgressTests {
    @Test func checkInsAfterACachedReadChangeOnlyTheirWeeks() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-21T12:00:00Z")  // 2026-W04
        let walk = try await user.createHabit("Walk")
        let goal = try await user.createGoal("Walk 10 times", type: .count, target: 10, habits: [walk]) {
            $0.startDate = .with {
                $0.year = 2026
                $0.month = 1
                $0.day = 5
            }
        }
        try await user.importEntries(walk, dates: [date(2026, 1, 6), date(2026, 1, 7)])
        #expect(try await user.goal(goal).progress.display == "2/10")
        try await user.checkIn(walk, times: 2)
        #expect(try await user.goal(goal).progress.display == "4/10")
        // Marking a past day not done empties its week: the cached week goes.
        _ = try await user.habits.markHabitNotDone(
            .with {
                $0.habitID = walk.id
                $0.date = date(2026, 1, 6)
            }, options: user.options)
        _ = try await user.habits.markHabitNotDone(
            .with {
                $0.habitID = walk.id
                $0.date = date(2026, 1, 7)
            }, options: user.options)
        #expect(try await user.goal(goal).progress.display == "2/10")
        try await user.checkIn(walk, on: date(2026, 1, 13))
        let cached = try await user.goal(goal)
        #expect(cached.progress.display == "3/10")
        #expect(try await user.history(goal).map(\.value) == [0, 1, 2])
        let replica = try await user.fixture.startReplica()
        defer { Task { await replica.shutdown() } }
        let fresh = GoalsClient(transport: try GoalsFixture.channel(to: replica.port, signedAs: "gateway"))
        #expect(try await fresh.getGoal(.with { $0.goalID = goal.id }, options: user.options) == cached)
    }
}

/// Recurring tasks and the end of a horizon for goals counted toward a total.
@Suite struct WeeklyAndEndingTests {
    @Test func aRecurringTaskIsDoneOrNotEachWeek() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // 2026-W03
        let review = try await user.createHabit("Weekly review")
        let goal = try await user.createGoal("Review every week", type: .recurringTask, target: 0, habits: [review]) {
            $0.startDate = .with {
                $0.year = 2026
                $0.month = 1
                $0.day = 5
            }
        }
        #expect(goal.progress.display == "Not done this week")
        #expect(goal.target.value == 1)
        try await user.importEntries(review, dates: [date(2026, 1, 6)])
        #expect(try await user.goal(goal).progress.overallPercent == 100)  // W02 done, W03 not over yet
        try await user.checkIn(review)
        let done = try await user.goal(goal)
        #expect(done.progress.display == "Done this week")
        #expect(done.progress.percent == 100)
        #expect(done.progress.weeksMet == 2)
        #expect(try await user.history(goal).map(\.met) == [true, true])
        try user.setNow("2026-01-28T12:00:00Z")  // W05: W04 was missed
        let later = try await user.goal(goal)
        #expect(later.progress.display == "Not done this week")
        #expect(later.progress.overallPercent == 66)
    }

    @Test func aCountGoalShortOfItsTargetExpiresAtTheEnd() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-05T12:00:00Z")
        let habit = try await user.createHabit("Cook")
        let goal = try await user.createGoal("Cook 5 times", type: .count, target: 5, horizon: .oneWeek, habits: [habit])
        try await user.checkIn(habit, times: 3)
        #expect(try await user.goal(goal).status == .inProgress)
        try user.setNow("2026-01-12T12:00:00Z")
        let ended = try await user.goal(goal)
        #expect(ended.status == .expired)
        #expect(ended.progress.display == "3/5")
        // It no longer holds a slot, and the default list still shows it (only archived goals are hidden).
        #expect(try await user.list([.expired]).map(\.id) == [goal.id])
    }

    @Test func historyRangesAreChecked() async throws {
        let user = try await TestUser()
        let goal = try await user.createGoal("Any", type: .count, target: 5)
        await expectError(.invalidArgument, field: "end_week") {
            _ = try await user.goals.getGoalHistory(
                .with {
                    $0.goalID = goal.id
                    $0.startWeek = .with {
                        $0.year = 2026
                        $0.week = 10
                    }
                    $0.endWeek = .with {
                        $0.year = 2026
                        $0.week = 2
                    }
                }, options: user.options)
        }
        await expectError(.invalidArgument, field: "start_week") {
            _ = try await user.goals.getGoalHistory(
                .with {
                    $0.goalID = goal.id
                    $0.startWeek = .with {
                        $0.year = 2026
                        $0.week = 60
                    }
                }, options: user.options)
        }
    }
}
