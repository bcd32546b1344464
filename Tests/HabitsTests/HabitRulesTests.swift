import Foundation
import HabitFlowEvents
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowServiceAPI
import HabitFlowServiceKit
import Testing
import HabitFlowTestSupport

/// Limits, validation, isolation between users and idempotent retries.
@Suite("Habit rules and bad input")
struct HabitRulesTests {
    @Test("at most 15 live habits (FAILED_PRECONDITION); deleting one makes room")
    func habitLimit() async throws {
        let user = try await TestUser()
        var habits: [Habit] = []
        for index in 1...15 { habits.append(try await user.createHabit("Habit \(index)")) }
        let error = await expectError(.failedPrecondition) { _ = try await user.createHabit("Sixteenth") }
        #expect(preconditionType(error) == "HABIT_LIMIT")
        _ = try await user.delete(habits[0])
        #expect(try await user.createHabit("Sixteenth").name == "Sixteenth")
        #expect(try await user.api.listHabits(.init(), options: user.options).habits.count == 15)
    }

    @Test("habit names: required, at most 100 characters, unique among live habits ignoring case")
    func habitNames() async throws {
        let user = try await TestUser()
        _ = try await user.createHabit("Read")
        let taken = await expectError(.alreadyExists) { _ = try await user.createHabit(" READ ") }
        #expect(taken?.message.contains("READ") == true)
        for bad in ["", String(repeating: "n", count: 101), "Line\nbreak"] {
            await expectError(.invalidArgument, field: "name") { _ = try await user.createHabit(bad) }
        }
        #expect(try await user.createHabit(String(repeating: "n", count: 100)).name.count == 100)
        await expectError(.invalidArgument, field: "unit") {
            _ = try await user.createHabit("Run", unit: String(repeating: "k", count: 21))
        }
        let other = try await user.createHabit("Write")
        await expectError(.alreadyExists) {
            _ = try await user.api.updateHabit(
                .with {
                    $0.habit.id = other.id
                    $0.habit.name = "read"
                    $0.updateMask.paths = ["name"]
                }, options: user.options)
        }
    }

    @Test("bad ids, dates, targets, values, masks and tokens are INVALID_ARGUMENT naming every field")
    func badInput() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let habit = try await user.createHabit("Valid")

        let several = await expectError(.invalidArgument) {
            _ = try await user.api.createHabit(
                .with {
                    $0.habitID = "not-a-uuid"
                    $0.name = ""
                    $0.weeklyTarget = 22
                    $0.categoryID = "42"
                }, options: user.options)
        }
        #expect(Set(several?.fieldViolations.map(\.field) ?? []) == ["habit_id", "name", "weekly_target", "category_id"])
        await expectError(.invalidArgument, field: "habit_id") {
            _ = try await user.createHabit("Nil id", id: "00000000-0000-0000-0000-000000000000")
        }
        await expectError(.invalidArgument, field: "habit_id") {
            _ = try await user.api.getHabit(.with { $0.habitID = "xyz" }, options: user.options)
        }
        await expectError(.invalidArgument, field: "habit_id") {
            _ = try await user.api.getHabit(.init(), options: user.options)
        }
        for bad in [date(2026, 2, 30), date(2026, 13, 1), date(0, 1, 1), date(2026, 1, 0)] {
            await expectError(.invalidArgument, field: "date") { try await user.markDone(habit, on: bad) }
        }
        // After the user's today.
        await expectError(.invalidArgument, field: "date") { try await user.markDone(habit, on: date(2026, 1, 15)) }
        await expectError(.invalidArgument, field: "date") { try await user.markNotDone(habit, on: date(2027, 1, 1)) }
        for bad in [-1, Double.nan, Double.infinity, 2e9] {
            await expectError(.invalidArgument, field: "value") { try await user.markDone(habit, value: bad) }
        }
        await expectError(.invalidArgument, field: "entry_id") { try await user.markDone(habit, entryID: "nope") }
        await expectError(.invalidArgument, field: "update_mask") {
            _ = try await user.api.updateHabit(
                .with {
                    $0.habit.id = habit.id
                    $0.updateMask.paths = ["live_from"]
                }, options: user.options)
        }
        await expectError(.invalidArgument, field: "update_mask") {
            _ = try await user.api.updateHabit(.with { $0.habit.id = habit.id }, options: user.options)
        }
        await expectError(.invalidArgument, field: "end_date") {
            _ = try await user.api.listEntries(
                .with {
                    $0.startDate = date(2026, 1, 10)
                    $0.endDate = date(2026, 1, 9)
                }, options: user.options)
        }
        await expectError(.invalidArgument, field: "start_date") {
            _ = try await user.api.listEntries(.with { $0.endDate = date(2026, 1, 9) }, options: user.options)
        }
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await user.api.listHabits(.with { $0.pageToken = "garbage" }, options: user.options)
        }
        await expectError(.invalidArgument, field: "page_size") {
            _ = try await user.api.listHabits(.with { $0.pageSize = -1 }, options: user.options)
        }
        await expectError(.invalidArgument, field: "cursor") {
            _ = try await user.api.listChanges(.with { $0.cursor = "bogus" }, options: user.options)
        }
        await expectError(.invalidArgument, field: "start_week") {
            _ = try await user.api.getScoreHistory(
                .with {
                    $0.startWeek = isoWeek(2015, 1)
                    $0.endWeek = isoWeek(2026, 1)
                }, options: user.options)
        }
    }

    @Test("a page token made by hand with a day number no date has is INVALID_ARGUMENT, not a crash (fuzz)")
    func handMadeEntriesPageToken() async throws {
        let user = try await TestUser()
        // Like the requests fuzz target's reproducer for goals: the checksum is no secret, and a day number near
        // Int.max trapped in LocalDate(daysSinceEpoch:).
        for days in ["9223372036854775807", "-9223372036854775808", "2932897"] {
            let token = PageToken.encode(list: "entries", [days, "3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c"])
            await expectError(.invalidArgument, field: "page_token") {
                _ = try await user.api.listEntries(
                    .with {
                        $0.startDate = date(2026, 1, 1)
                        $0.endDate = date(2026, 1, 31)
                        $0.pageToken = token
                    }, options: user.options)
            }
        }
    }

    @Test("another user's habit is NOT_FOUND everywhere, never PERMISSION_DENIED")
    func otherUsersHabitIsNotFound() async throws {
        let owner = try await TestUser()
        let stranger = try await TestUser()
        let habit = try await owner.createHabit("Private")
        let ownerCategory = try #require(try await owner.categories().first)

        await expectError(.notFound) { _ = try await stranger.api.getHabit(.with { $0.habitID = habit.id }, options: stranger.options) }
        await expectError(.notFound) { try await stranger.markDone(habit) }
        await expectError(.notFound) { try await stranger.markNotDone(habit) }
        await expectError(.notFound) { _ = try await stranger.updateTarget(habit, to: 3) }
        await expectError(.notFound) { _ = try await stranger.delete(habit) }
        await expectError(.notFound) {
            _ = try await stranger.api.listEntries(
                .with {
                    $0.habitID = habit.id
                    $0.startDate = date(2026, 1, 1)
                    $0.endDate = date(2026, 1, 2)
                }, options: stranger.options)
        }
        await expectError(.notFound) {
            _ = try await stranger.api.deleteCategory(.with { $0.categoryID = ownerCategory.id }, options: stranger.options)
        }
        await expectError(.notFound) { _ = try await stranger.createHabit("Mine", category: ownerCategory.id) }
        // The same client id in another account is that account's own.
        let clientID = UUID().uuidString.lowercased()
        let mine = try await owner.createHabit("Shared id", id: clientID)
        let theirs = try await stranger.createHabit("Shared id", id: clientID)
        #expect(mine.id == theirs.id)
        #expect(try await owner.api.getHabit(.with { $0.habitID = clientID }, options: owner.options).name == "Shared id")
        #expect(try await owner.delete(mine).deleted)
        #expect(!(try await stranger.api.getHabit(.with { $0.habitID = clientID }, options: stranger.options).deleted))
    }

    @Test("retries with the same client id return the first result (habits and entries)")
    func idempotentRetries() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let habitID = UUID().uuidString.lowercased()
        let first = try await user.createHabit("Retry me", target: 4, id: habitID)
        let retry = try await user.createHabit("Something else", target: 2, id: habitID)
        #expect(retry == first)
        #expect(first.id == habitID)

        let entryID = UUID().uuidString.lowercased()
        let entry = try await user.markDone(first, on: date(2026, 1, 13), entryID: entryID)
        let again = try await user.markDone(first, on: date(2026, 1, 12), entryID: entryID)
        #expect(again == entry)
        #expect(TestUser.progress(of: first, in: try await user.week()) == "1/4")

        // Concurrent retries of one create: one habit.
        let concurrentID = UUID().uuidString.lowercased()
        let results = try await withThrowingTaskGroup(of: Habit.self) { group in
            for _ in 0..<4 { group.addTask { try await user.createHabit("Concurrent", id: concurrentID) } }
            return try await group.reduce(into: [Habit]()) { $0.append($1) }
        }
        #expect(Set(results.map(\.id)) == [concurrentID])
        #expect(try await user.api.listHabits(.init(), options: user.options).habits.count == 2)
    }

    @Test("mark not done removes that day's entries; numeric habits keep their values")
    func entriesAndValues() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let run = try await user.createHabit("Run", target: 3, unit: "km")
        #expect(run.unit == "km")
        #expect(try await user.markDone(run, value: 5.5).value == 5.5)
        #expect(try await user.markDone(run, value: 0).value == 0)
        #expect(try await user.markDone(run, on: date(2026, 1, 12)).value == 1)
        #expect(try await user.markNotDone(run) == 2)
        #expect(try await user.markNotDone(run) == 0)
        let entries = try await user.api.listEntries(
            .with {
                $0.habitID = run.id
                $0.startDate = date(2026, 1, 12)
                $0.endDate = date(2026, 1, 14)
            }, options: user.options
        ).entries
        #expect(entries.map(\.date) == [date(2026, 1, 12)])
        // Unit and category can be cleared with a mask.
        let cleared = try await user.api.updateHabit(
            .with {
                $0.habit.id = run.id
                $0.updateMask.paths = ["unit", "category_id"]
            }, options: user.options)
        #expect(cleared.unit.isEmpty)
    }

    @Test("a call without a user is UNAUTHENTICATED; a deleted account is refused")
    func identity() async throws {
        let user = try await TestUser()
        await expectError(.unauthenticated) { _ = try await user.api.listCategories(.init()) }
        _ = try await user.createHabit("Soon gone")
        var deleted = Habitflow_Events_V1_UserDeleted()
        deleted.userID = user.id.uuidString.lowercased()
        try await user.fixture.deliver(deleted, aggregateID: deleted.userID)
        let error = await expectError(.failedPrecondition) { _ = try await user.categories() }
        #expect(preconditionType(error) == "ACCOUNT_DELETED")
    }
}
