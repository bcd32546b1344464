import Foundation
import HabitFlowEvents
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowTestSupport
import Testing

/// Weeks in the user's time zone, dated targets, deletions and the weekly score, over RPC.
@Suite("Weeks, time zones and weekly scores")
struct WeekAndTimeTests {
    @Test("the week rolls over at Sunday/Monday midnight in the user's zone, not in UTC")
    func weekRolloverInUserZone() async throws {
        let user = try await TestUser()
        try await user.setTimeZone("Pacific/Auckland")  // UTC+13 in January
        try user.setNow("2026-01-18T10:59:00Z")  // Sunday 23:59 in Auckland
        let habit = try await user.createHabit("Floss", target: 2)
        try await user.markDone(habit)
        var view = try await user.week()
        #expect(view.weekName == "2026-W03")
        #expect(view.today == date(2026, 1, 18))
        #expect(view.timeZone == "Pacific/Auckland")
        #expect(TestUser.progress(of: habit, in: view) == "1/2")
        #expect(view.habits.first?.doneDays == [false, false, false, false, false, false, true])
        // Monday the 19th is still tomorrow there.
        await expectError(.invalidArgument, field: "date") { try await user.markDone(habit, on: date(2026, 1, 19)) }

        try user.setNow("2026-01-18T11:00:00Z")  // Monday 00:00 in Auckland, still Sunday in UTC
        view = try await user.week()
        #expect(view.weekName == "2026-W04")
        #expect(view.today == date(2026, 1, 19))
        #expect(TestUser.progress(of: habit, in: view) == "0/2")
        let entry = try await user.markDone(habit)
        #expect(entry.date == date(2026, 1, 19))
        #expect(TestUser.progress(of: habit, in: try await user.week()) == "1/2")
        #expect(TestUser.progress(of: habit, in: try await user.week(2026, 3)) == "1/2")
    }

    @Test("the score history's current week is the user's: a week ahead of UTC's, with a habit created in it")
    func scoreHistoryAheadOfUTC() async throws {
        let user = try await TestUser()
        try await user.setTimeZone("Pacific/Kiritimati")  // UTC+14
        try user.setNow("2026-01-18T12:00:00Z")  // Sunday noon in UTC (2026-W03), Monday 02:00 there (2026-W04)
        // Created in Kiritimati's week 4: live from Monday the 19th, after UTC's week ends.
        let habit = try await user.createHabit("Swim", target: 1)
        try await user.markDone(habit)
        let weeks = try await user.api.getScoreHistory(.init(), options: user.options).weeks
        #expect(weeks.count == 12)
        #expect(weeks.last?.weekName == "2026-W04")
        #expect(weeks.last?.score.display == "100% (1/1 habits)")
        #expect(weeks.dropLast().allSatisfy { $0.score.display == "0% (0/0 habits)" })
        // The week after is still the future there.
        await expectError(.invalidArgument, field: "end_week") {
            _ = try await user.api.getScoreHistory(.with { $0.endWeek = isoWeek(2026, 5) }, options: user.options)
        }
    }

    @Test("a DST week has its seven days and today follows the zone's offset (spring forward and fall back)")
    func daylightSavingWeeks() async throws {
        let user = try await TestUser()
        try await user.setTimeZone("America/New_York")
        // 2026-W10 (March 2 to 8): clocks go from 2:00 to 3:00 on Sunday March 8.
        try user.setNow("2026-03-09T03:59:00Z")  // Sunday 23:59 EDT
        let habit = try await user.createHabit("Sleep early", target: 7)
        for day in Int32(2)...8 { try await user.markDone(habit, on: date(2026, 3, day)) }
        var view = try await user.week()
        #expect(view.weekName == "2026-W10")
        #expect(view.today == date(2026, 3, 8))
        #expect(TestUser.progress(of: habit, in: view) == "7/7")
        #expect(view.score.display == "100% (1/1 habits)")

        // 04:30 UTC is Monday 00:30 EDT (a fixed -5 h offset would still say Sunday 23:30).
        try user.setNow("2026-03-09T04:30:00Z")
        view = try await user.week()
        #expect(view.weekName == "2026-W11")
        #expect(view.today == date(2026, 3, 9))

        // 2026-W44 (October 26 to November 1): clocks go from 2:00 back to 1:00 on Sunday November 1.
        // 04:30 UTC on November 2 is Sunday 23:30 EST (a fixed -4 h offset would say Monday 00:30).
        try user.setNow("2026-11-02T04:30:00Z")
        view = try await user.week()
        #expect(view.weekName == "2026-W44")
        #expect(view.today == date(2026, 11, 1))
        #expect(try await user.markDone(habit).date == date(2026, 11, 1))
    }

    @Test("a target change applies from its week on; earlier weeks and the score history keep the old target")
    func targetChangeKeepsHistory() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-07T12:00:00Z")  // Wednesday of 2026-W02
        let habit = try await user.createHabit("Yoga", target: 7)
        for day in Int32(5)...7 { try await user.markDone(habit, on: date(2026, 1, day)) }

        try user.setNow("2026-01-21T12:00:00Z")  // Wednesday of 2026-W04
        let retargeted = try await user.updateTarget(habit, to: 3)
        #expect(retargeted.weeklyTarget == 3)
        #expect(retargeted.targetHistory.map { "\($0.fromWeek.year)-W\($0.fromWeek.week):\($0.weeklyTarget)" } == [
            "2026-W2:7", "2026-W4:3",
        ])
        for day in Int32(19)...21 { try await user.markDone(habit, on: date(2026, 1, day)) }

        #expect(TestUser.progress(of: habit, in: try await user.week(2026, 2)) == "3/7")
        #expect(TestUser.progress(of: habit, in: try await user.week(2026, 3)) == "0/7")
        #expect(TestUser.progress(of: habit, in: try await user.week()) == "3/3")
        func history() async throws -> [String] {
            let weeks = try await user.api.getScoreHistory(
                .with {
                    $0.startWeek = isoWeek(2026, 2)
                    $0.endWeek = isoWeek(2026, 4)
                }, options: user.options).weeks
            #expect(weeks.map(\.weekName) == ["2026-W02", "2026-W03", "2026-W04"])
            return weeks.map(\.score.display)
        }
        #expect(try await history() == ["0% (0/1 habits)", "0% (0/1 habits)", "100% (1/1 habits)"])

        // Editing past days changes that week's figures, and only that week's.
        for day in Int32(8)...11 { try await user.markDone(habit, on: date(2026, 1, day)) }
        #expect(TestUser.progress(of: habit, in: try await user.week(2026, 2)) == "7/7")
        #expect(try await user.markNotDone(habit, on: date(2026, 1, 11)) == 1)
        #expect(try await history() == ["0% (0/1 habits)", "0% (0/1 habits)", "100% (1/1 habits)"])
        try await user.markDone(habit, on: date(2026, 1, 11))
        #expect(try await history() == ["100% (1/1 habits)", "0% (0/1 habits)", "100% (1/1 habits)"])
        // Changing the target twice in one week keeps one period for that week.
        #expect(try await user.updateTarget(habit, to: 4).targetHistory.map(\.weeklyTarget) == [7, 4])
    }

    @Test("a habit deleted mid-week leaves that week and later ones; earlier weeks and its entries stay")
    func habitDeletedMidWeek() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-12T09:00:00Z")  // Monday of 2026-W03
        let kept = try await user.createHabit("Kept", target: 1)
        let dropped = try await user.createHabit("Dropped", target: 1)
        try await user.markDone(kept)
        try await user.markDone(dropped)

        try user.setNow("2026-01-21T09:00:00Z")  // Wednesday of 2026-W04
        try await user.markDone(kept, on: date(2026, 1, 19))
        try await user.markDone(dropped, on: date(2026, 1, 19))
        let tombstone = try await user.delete(dropped)
        #expect(tombstone.deleted)
        #expect(tombstone.deletedOn == date(2026, 1, 21))
        #expect(try await user.delete(dropped) == tombstone)  // deleting again changes nothing

        let thisWeek = try await user.week()
        #expect(thisWeek.habits.map(\.habit.id) == [kept.id])
        #expect(thisWeek.score.display == "100% (1/1 habits)")
        let lastWeek = try await user.week(2026, 3)
        #expect(lastWeek.habits.map(\.habit.id) == [kept.id, dropped.id])
        #expect(lastWeek.score.display == "100% (2/2 habits)")

        let entries = try await user.api.listEntries(
            .with {
                $0.habitID = dropped.id
                $0.startDate = date(2026, 1, 1)
                $0.endDate = date(2026, 1, 31)
            }, options: user.options)
        #expect(entries.entries.map(\.date) == [date(2026, 1, 12), date(2026, 1, 19)])
        let error = await expectError(.failedPrecondition) { try await user.markDone(dropped) }
        #expect(preconditionType(error) == "HABIT_DELETED")
        // The name is free again, and the new habit counts from this week.
        #expect(try await user.createHabit("dropped").name == "dropped")

        let payload = try #require(
            try await user.fixture.published("habitflow.events.v1.HabitDeleted", aggregateID: dropped.id))
        let event = try Habitflow_Events_V1_HabitDeleted(serializedBytes: payload)
        #expect(event.userID == user.id.uuidString.lowercased())
        #expect(event.habitID == dropped.id)
    }

    @Test("the week view: category scores, today's progress, habits created later and future weeks")
    func weekViewDetails() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let categories = try await user.categories()
        let health = try #require(categories.first { $0.name == "Health" })
        let run = try await user.createHabit("Run", target: 2, category: health.id)
        let swim = try await user.createHabit("Swim", target: 1, category: health.id)
        let save = try await user.createHabit("Save", target: 1)
        try await user.markDone(run, on: date(2026, 1, 12))
        try await user.markDone(run)
        try await user.markDone(save)
        let view = try await user.week()
        #expect(view.score.display == "67% (2/3 habits)")
        #expect(view.score.metHabits == 2)
        #expect(view.todayProgress.date == date(2026, 1, 14))
        #expect(view.todayProgress.completedHabits == 2)
        #expect(view.todayProgress.totalHabits == 3)
        #expect(view.categoryScores.map(\.categoryName) == [
            "Career", "Health", "Family", "Finances", "Wisdom", "Uncategorized",
        ])
        #expect(view.categoryScores.first { $0.categoryName == "Health" }?.score.display == "50% (1/2 habits)")
        #expect(view.categoryScores.first { $0.categoryName == "Career" }?.score.display == "0% (0/0 habits)")
        #expect(view.categoryScores.last?.score.display == "100% (1/1 habits)")
        #expect(view.habits.first { $0.habit.id == swim.id }?.percent == 0)
        #expect(view.habits.first { $0.habit.id == run.id }?.todayCompletions == 1)

        // A past week: the habits did not exist yet; no today progress.
        let earlier = try await user.week(2026, 2)
        #expect(earlier.habits.isEmpty)
        #expect(earlier.score.display == "0% (0/0 habits)")
        #expect(!earlier.hasTodayProgress)
        await expectError(.invalidArgument, field: "week") { _ = try await user.week(2026, 4) }
        await expectError(.invalidArgument, field: "week") { _ = try await user.week(2026, 54) }
        await expectError(.invalidArgument, field: "end_week") {
            _ = try await user.api.getScoreHistory(.with { $0.endWeek = isoWeek(2027, 1) }, options: user.options)
        }
        // The default history: the 12 weeks up to this one.
        let history = try await user.api.getScoreHistory(.init(), options: user.options)
        #expect(history.weeks.count == 12)
        #expect(history.weeks.last?.weekName == "2026-W03")
        #expect(history.weeks.first?.weekName == "2025-W44")
        #expect(history.weeks.last?.score.display == "67% (2/3 habits)")
    }

    @Test("a time zone change moves today but never past entries")
    func timeZoneChangeKeepsEntries() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let habit = try await user.createHabit("Tea")
        #expect(try await user.markDone(habit).date == date(2026, 1, 14))
        try await user.setTimeZone("Pacific/Kiritimati")  // UTC+14: already the 15th there
        #expect(try await user.week().today == date(2026, 1, 15))
        #expect(try await user.markDone(habit).date == date(2026, 1, 15))
        let entries = try await user.api.listEntries(
            .with {
                $0.startDate = date(2026, 1, 1)
                $0.endDate = date(2026, 1, 31)
            }, options: user.options
        ).entries
        #expect(entries.map(\.date) == [date(2026, 1, 14), date(2026, 1, 15)])
        // An older update (by event time) does not undo the newer zone; an unknown zone is ignored.
        try await user.setTimeZone("Europe/Berlin", changedAt: Date(timeIntervalSince1970: 0))
        try await user.setTimeZone("Mars/Olympus_Mons")
        try await user.setTimeZone("GMT+2")
        #expect(try await user.week().timeZone == "Pacific/Kiritimati")
    }
}
