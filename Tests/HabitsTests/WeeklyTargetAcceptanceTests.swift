import Foundation
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import Testing
import HabitFlowTestSupport

/// Seed 003 (Weekly Habit Target), every acceptance scenario, over RPC against the real service and Postgres.
/// The week is 2026-W03 (Monday January 12 to Sunday January 18); "now" is Wednesday the 14th, noon UTC.
@Suite("Seed 003: weekly habit target")
struct WeeklyTargetAcceptanceTests {
    static let wednesday = "2026-01-14T12:00:00Z"

    // MARK: User Story 1: set a weekly target for a new habit

    @Test("US1-1: the weekly target takes the values 1 through 7 (and up to 21), nothing outside")
    func targetChoices() async throws {
        let user = try await TestUser()
        try user.setNow(Self.wednesday)
        for target in Int32(1)...7 {
            #expect(try await user.createHabit("Habit \(target)", target: target).weeklyTarget == target)
        }
        #expect(try await user.createHabit("Water", target: 21).weeklyTarget == 21)
        for bad in [Int32(0), 22, -1] {
            await expectError(.invalidArgument, field: "weekly_target") {
                _ = try await user.createHabit("Bad \(bad)", target: bad)
            }
        }
    }

    @Test("US1-2: a habit created without a target gets 7 times a week")
    func defaultTarget() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Brush teeth")
        #expect(habit.weeklyTarget == 7)
        #expect(habit.targetHistory.map(\.weeklyTarget) == [7])
    }

    @Test("US1-3: saving stores the selected target")
    func createdWithSelectedTarget() async throws {
        let user = try await TestUser()
        let gym = try await user.createHabit("Gym", target: 3)
        #expect(gym.weeklyTarget == 3)
        let stored = try await user.api.listHabits(.init(), options: user.options).habits
        #expect(stored.map(\.weeklyTarget) == [3])
    }

    @Test("US1-4: the habit's details show the target")
    func detailsShowTarget() async throws {
        let user = try await TestUser()
        let gym = try await user.createHabit("Gym", target: 3)
        let details = try await user.api.getHabit(.with { $0.habitID = gym.id }, options: user.options)
        #expect(details.weeklyTarget == 3)
        #expect(details.name == "Gym")
    }

    // MARK: User Story 2: edit the weekly target of an existing habit

    @Test("US2-1: editing starts from the saved target")
    func editStartsFromSavedTarget() async throws {
        let user = try await TestUser()
        let run = try await user.createHabit("Run", target: 5)
        #expect(try await user.api.getHabit(.with { $0.habitID = run.id }, options: user.options).weeklyTarget == 5)
    }

    @Test("US2-2/3: a new target is saved and shown everywhere")
    func changeTarget() async throws {
        let user = try await TestUser()
        try user.setNow(Self.wednesday)
        let gym = try await user.createHabit("Gym", target: 5)
        let updated = try await user.updateTarget(gym, to: 3)
        #expect(updated.weeklyTarget == 3)
        #expect(try await user.api.getHabit(.with { $0.habitID = gym.id }, options: user.options).weeklyTarget == 3)
        #expect(TestUser.progress(of: gym, in: try await user.week()) == "0/3")
    }

    @Test("US2-4: a cancelled or rejected edit keeps the original target")
    func rejectedEditKeepsTarget() async throws {
        let user = try await TestUser()
        let gym = try await user.createHabit("Gym", target: 5)
        await expectError(.invalidArgument, field: "habit.weekly_target") { _ = try await user.updateTarget(gym, to: 0) }
        // Editing another field leaves the target alone.
        let renamed = try await user.api.updateHabit(
            .with {
                $0.habit.id = gym.id
                $0.habit.name = "Gym session"
                $0.habit.weeklyTarget = 1
                $0.updateMask.paths = ["name"]
            }, options: user.options)
        #expect(renamed.name == "Gym session")
        #expect(renamed.weeklyTarget == 5)
    }

    // MARK: User Story 3: weekly progress on the weekly screen

    @Test("US3-1: every habit shows its progress as X/Y")
    func progressFormat() async throws {
        let user = try await TestUser()
        try user.setNow(Self.wednesday)
        let read = try await user.createHabit("Read", target: 7)
        let gym = try await user.createHabit("Gym", target: 3)
        try await user.markDone(gym, on: date(2026, 1, 12))
        let view = try await user.week()
        #expect(view.weekName == "2026-W03")
        #expect(view.habits.map(\.progress) == ["0/7", "1/3"])
        #expect(view.habits.map(\.habit.id) == [read.id, gym.id])
    }

    @Test("US3-2: three completions of a 7-times habit show 3/7")
    func threeOfSeven() async throws {
        let user = try await TestUser()
        try user.setNow(Self.wednesday)
        let habit = try await user.createHabit("Meditate", target: 7)
        for day in Int32(12)...14 { try await user.markDone(habit, on: date(2026, 1, day)) }
        #expect(TestUser.progress(of: habit, in: try await user.week()) == "3/7")
    }

    @Test("US3-3: five completions of a 5-times habit show 5/5")
    func fiveOfFive() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-18T20:00:00Z")
        let habit = try await user.createHabit("Walk", target: 5)
        for day in Int32(12)...16 { try await user.markDone(habit, on: date(2026, 1, day)) }
        let view = try await user.week()
        #expect(TestUser.progress(of: habit, in: view) == "5/5")
        #expect(view.habits.first?.met == true)
        #expect(view.habits.first?.doneDays == [true, true, true, true, true, false, false])
    }

    @Test("US3-4: a habit not done yet with target 4 shows 0/4")
    func zeroOfFour() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Stretch", target: 4)
        #expect(TestUser.progress(of: habit, in: try await user.week()) == "0/4")
    }

    @Test("US3-5: completing a habit during the week moves 2/7 to 3/7")
    func completingIncreasesProgress() async throws {
        let user = try await TestUser()
        try user.setNow(Self.wednesday)
        let habit = try await user.createHabit("Journal", target: 7)
        try await user.markDone(habit, on: date(2026, 1, 12))
        try await user.markDone(habit, on: date(2026, 1, 13))
        #expect(TestUser.progress(of: habit, in: try await user.week()) == "2/7")
        try await user.markDone(habit)  // today
        let view = try await user.week()
        #expect(TestUser.progress(of: habit, in: view) == "3/7")
        #expect(view.habits.first?.todayCompletions == 1)
        #expect(view.todayProgress.completedHabits == 1)
    }

    // MARK: Edge cases and storage-level validation

    @Test("more completions than the target show the real count: 8/7")
    func eightOfSeven() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-18T12:00:00Z")
        let habit = try await user.createHabit("Water", target: 7)
        for day in Int32(12)...18 { try await user.markDone(habit, on: date(2026, 1, day)) }
        try await user.markDone(habit, on: date(2026, 1, 18))
        let view = try await user.week()
        let row = try #require(view.habits.first)
        #expect(row.progress == "8/7")
        #expect(row.completions == 8)
        #expect(row.met)
        #expect(row.percent == 100)
        #expect(row.dayCompletions == [1, 1, 1, 1, 1, 1, 2])
        #expect(view.score.display == "100% (1/1 habits)")
    }

    @Test("the database refuses a weekly target outside 1...21 even without the API")
    func storageRejectsTargets() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Stored")
        let habitID = try #require(UUID(uuidString: habit.id))
        for bad in [Int16(0), 22] {
            let error = await #expect(throws: PostgresError.self) {
                try await user.fixture.pool.execute(
                    """
                    INSERT INTO habit_targets (user_id, habit_id, week_start, weekly_target) \
                    VALUES (\(user.id), \(habitID), DATE '2030-01-07', \(bad))
                    """)
            }
            #expect(error?.kind == .checkViolation)
        }
    }
}
