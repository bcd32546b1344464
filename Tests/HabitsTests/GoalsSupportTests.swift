import Foundation
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import SwiftProtobuf
import Testing
import HabitFlowTestSupport

/// What goals asks of habits: data versions on AggregateEntries, habit details (LookupHabits), and unit holds that
/// keep a quantity goal's habits in its unit.
@Suite("Internal calls for goals")
struct GoalsSupportTests {
    typealias AggregateResponse = Habitflow_Habits_V1_AggregateEntriesResponse

    static func aggregate(
        _ user: TestUser, _ habits: [Habit], unlessVersion: Int64? = nil, includeDetails: Bool = false
    ) async throws -> AggregateResponse {
        try await user.fixture.internalAPI.aggregateEntries(
            .with {
                $0.userID = user.id.uuidString
                $0.habitIds = habits.map(\.id)
                $0.startDate = date(2026, 1, 1)
                $0.endDate = date(2026, 1, 31)
                if let unlessVersion { $0.unlessVersion = unlessVersion }
                $0.includeDetails = includeDetails
            })
    }

    static func lookup(_ user: TestUser, _ habitIDs: [String]) async throws -> Habitflow_Habits_V1_LookupHabitsResponse {
        try await user.fixture.internalAPI.lookupHabits(
            .with {
                $0.userID = user.id.uuidString
                $0.habitIds = habitIDs
            })
    }

    static func hold(_ user: TestUser, _ holder: String, _ habits: [Habit], unit: String) async throws {
        _ = try await user.fixture.internalAPI.setUnitHolds(
            .with {
                $0.userID = user.id.uuidString
                $0.holder = holder
                $0.habitIds = habits.map(\.id)
                $0.unit = unit
            })
    }

    /// UpdateHabit of the unit alone ("" removes it).
    static func setUnit(_ user: TestUser, _ habit: Habit, _ unit: String) async throws -> Habit {
        try await user.api.updateHabit(
            .with {
                $0.habit.id = habit.id
                $0.habit.unit = unit
                $0.updateMask.paths = ["unit"]
            }, options: user.options)
    }

    @Test("the version changes with every write of the user's, not with reads; unless_version answers unchanged")
    func versions() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let run = try await user.createHabit("Run", unit: "km")
        try await user.markDone(run, on: date(2026, 1, 12), value: 5)
        let first = try await Self.aggregate(user, [run])
        #expect(!first.unchanged && first.version > 0)
        #expect(first.aggregates.map(\.valueSum) == [5])

        // Reads leave the version alone.
        _ = try await user.week()
        _ = try await user.api.listHabits(.init(), options: user.options)
        _ = try await Self.lookup(user, [run.id])
        #expect(try await Self.aggregate(user, [run]).version == first.version)

        // The cached answer is still current: only `unchanged` and the version.
        let same = try await Self.aggregate(user, [run], unlessVersion: first.version, includeDetails: true)
        #expect(same.unchanged && same.version == first.version)
        #expect(same.aggregates.isEmpty && same.habits.isEmpty && same.categories.isEmpty)

        // A check-in makes it stale: a full answer with a later version.
        try await user.markDone(run, on: date(2026, 1, 13), value: 2)
        let after = try await Self.aggregate(user, [run], unlessVersion: first.version)
        #expect(!after.unchanged && after.version > first.version)
        #expect(after.aggregates.map(\.valueSum) == [7])

        // Every other kind of write moves it on too.
        var version = after.version
        func expectNewVersion(_ write: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let response = try await Self.aggregate(user, [run], unlessVersion: version)
            #expect(!response.unchanged && response.version > version, "\(write)", sourceLocation: sourceLocation)
            version = response.version
        }
        #expect(try await user.markNotDone(run, on: date(2026, 1, 13)) == 1)
        try await expectNewVersion("MarkHabitNotDone")
        _ = try await user.updateTarget(run, to: 3)
        try await expectNewVersion("UpdateHabit")
        let walk = try await user.createHabit("Walk")
        try await expectNewVersion("CreateHabit")
        _ = try await user.delete(walk)
        try await expectNewVersion("DeleteHabit")
        let category = try await user.api.createCategory(.with { $0.name = "Sports" }, options: user.options)
        try await expectNewVersion("CreateCategory")
        _ = try await user.api.renameCategory(
            .with {
                $0.categoryID = category.id
                $0.name = "Sport"
            }, options: user.options)
        try await expectNewVersion("RenameCategory")
        _ = try await user.api.reorderCategories(.with { $0.categoryIds = [category.id] }, options: user.options)
        try await expectNewVersion("ReorderCategories")
        _ = try await user.api.deleteCategory(.with { $0.categoryID = category.id }, options: user.options)
        try await expectNewVersion("DeleteCategory")
        _ = try await user.fixture.internalAPI.importEntries(
            .with {
                $0.userID = user.id.uuidString
                $0.entries = [.with {
                    $0.entryID = UUID().uuidString
                    $0.habitID = run.id
                    $0.date = date(2026, 1, 2)
                }]
            }, options: user.options)
        try await expectNewVersion("ImportEntries")
        try await user.setTimeZone("Europe/Berlin")
        try await expectNewVersion("a time zone change")

        // No habits at all: just the version (what goals asks for a goal without links).
        let none = try await Self.aggregate(user, [])
        #expect(none.version == version && none.aggregates.isEmpty)
        // A user the service has never seen is created on the spot; a deleted account is refused.
        let stranger = try await TestUser()
        #expect(try await Self.aggregate(stranger, []).version > 0)
        _ = try await user.fixture.internalAPI.purgeUser(.with { $0.userID = stranger.id.uuidString })
        await expectError(.failedPrecondition) { _ = try await Self.aggregate(stranger, []) }
        await expectError(.invalidArgument, field: "habit_ids") {
            _ = try await user.fixture.internalAPI.aggregateEntries(
                .with {
                    $0.userID = user.id.uuidString
                    $0.habitIds = (0...100).map { _ in UUID().uuidString }
                    $0.startDate = date(2026, 1, 1)
                    $0.endDate = date(2026, 1, 2)
                })
        }
    }

    @Test("LookupHabits and include_details: the habits in request order, deleted ones too, and live categories")
    func details() async throws {
        let user = try await TestUser()
        var categories = try await user.categories()
        let health = try #require(categories.first { $0.name == "Health" })
        let career = try #require(categories.first { $0.name == "Career" })
        let family = try #require(categories.first { $0.name == "Family" })
        _ = try await user.api.reorderCategories(.with { $0.categoryIds = [health.id] }, options: user.options)
        _ = try await user.api.deleteCategory(.with { $0.categoryID = family.id }, options: user.options)
        categories = try await user.categories()
        #expect(categories.map(\.name) == ["Health", "Career", "Finances", "Wisdom"])

        let run = try await user.createHabit("Run", category: health.id, unit: "km")
        let read = try await user.createHabit("Read", category: career.id)
        let loose = try await user.createHabit("Loose")
        let gone = try await user.createHabit("Gone", unit: "min")
        _ = try await user.delete(gone)

        func rows(_ habits: [Habitflow_Habits_V1_HabitSummary]) -> [String] {
            habits.map { "\($0.habitID) \($0.name) \($0.unit) \($0.categoryID) \($0.deleted)" }
        }
        let expected = [
            "\(gone.id) Gone min  true", "\(run.id) Run km \(health.id) false", "\(loose.id) Loose   false",
            "\(read.id) Read  \(career.id) false",
        ]
        let expectedCategories = categories.map { "\($0.id) \($0.name) \($0.position)" }
        func categoryRows(_ categories: [Habitflow_Habits_V1_CategorySummary]) -> [String] {
            categories.map { "\($0.categoryID) \($0.name) \($0.position)" }
        }
        #expect(expectedCategories.first == "\(health.id) Health 0")

        let looked = try await Self.lookup(user, [gone.id, run.id, loose.id, read.id])
        #expect(rows(looked.habits) == expected)
        #expect(categoryRows(looked.categories) == expectedCategories)

        let aggregated = try await Self.aggregate(user, [gone, run, loose, read], includeDetails: true)
        #expect(rows(aggregated.habits) == expected)
        #expect(categoryRows(aggregated.categories) == expectedCategories)
        // Without include_details: neither.
        let plain = try await Self.aggregate(user, [gone, run, loose, read])
        #expect(plain.habits.isEmpty && plain.categories.isEmpty)

        // No ids: the categories alone.
        let onlyCategories = try await Self.lookup(user, [])
        #expect(onlyCategories.habits.isEmpty && categoryRows(onlyCategories.categories) == expectedCategories)

        // Another user's habit (or none at all) is NOT_FOUND, naming the first such id.
        let stranger = try await TestUser()
        let theirs = try await stranger.createHabit("Theirs")
        let unknown = UUID().uuidString.lowercased()
        let error = await expectError(.notFound) { _ = try await Self.lookup(user, [run.id, theirs.id, unknown]) }
        #expect(error?.message.contains(theirs.id) == true, "\(String(describing: error))")
        let aggregateError = await expectError(.notFound) {
            _ = try await Self.aggregate(user, [run, theirs], includeDetails: true)
        }
        #expect(aggregateError?.message.contains(theirs.id) == true)
        await expectError(.invalidArgument, field: "habit_ids[1]") { _ = try await Self.lookup(user, [run.id, run.id]) }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await user.fixture.internalAPI.lookupHabits(.with { $0.userID = "someone" })
        }
    }

    @Test("unit holds: set, replace, release; UpdateHabit cannot change a held unit; refusals change nothing")
    func unitHolds() async throws {
        let user = try await TestUser()
        let run = try await user.createHabit("Run", unit: "km")
        let walk = try await user.createHabit("Walk", unit: "km")
        let swim = try await user.createHabit("Swim", unit: "m")
        let read = try await user.createHabit("Read")
        let old = try await user.createHabit("Old", unit: "km")
        _ = try await user.delete(old)
        let goalA = "goal:\(UUID().uuidString.lowercased())"
        let goalB = "goal:\(UUID().uuidString.lowercased())"

        try await Self.hold(user, goalA, [run, walk], unit: "km")
        // A held unit cannot change, nor go away; the same unit again is fine, and so are other fields.
        let inUse = await expectError(.failedPrecondition) { _ = try await Self.setUnit(user, run, "mi") }
        #expect(inUse?.errorReason == "HABIT_UNIT_IN_USE")
        #expect(preconditionType(inUse) == "HABIT_UNIT_IN_USE")
        #expect(inUse?.message.contains("quantity goal") == true && inUse?.message.contains("unlink") == true)
        let removed = await expectError(.failedPrecondition) { _ = try await Self.setUnit(user, walk, "") }
        #expect(removed?.errorReason == "HABIT_UNIT_IN_USE")
        #expect(try await Self.setUnit(user, run, "km").unit == "km")
        #expect(try await user.updateTarget(run, to: 3).weeklyTarget == 3)
        #expect(try await user.api.getHabit(.with { $0.habitID = run.id }, options: user.options).unit == "km")

        // Replacing the set releases what it no longer names; a second holder keeps its own.
        try await Self.hold(user, goalA, [walk], unit: "km")
        try await Self.hold(user, goalB, [walk], unit: "km")
        #expect(try await Self.setUnit(user, run, "mi").unit == "mi")
        try await Self.hold(user, goalA, [], unit: "")
        await expectError(.failedPrecondition) { _ = try await Self.setUnit(user, walk, "mi") }
        // Setting the same set again is a no-op (IDEMPOTENT); releasing it frees the unit.
        try await Self.hold(user, goalB, [walk], unit: "km")
        try await Self.hold(user, goalB, [], unit: "")
        #expect(try await Self.setUnit(user, walk, "mi").unit == "mi")
        #expect(try await Self.setUnit(user, walk, "km").unit == "km")

        // All or nothing: a habit in another unit, without a unit, deleted, or not the user's refuses the whole set.
        let mismatch = await expectError(.failedPrecondition) {
            try await Self.hold(user, goalA, [walk, swim], unit: "km")
        }
        #expect(mismatch?.errorReason == "UNIT_MISMATCH")
        #expect(mismatch?.message.contains("\"m\"") == true && mismatch?.message.contains("\"km\"") == true)
        #expect(mismatch?.message.contains(swim.id) == true)
        let noUnit = await expectError(.failedPrecondition) { try await Self.hold(user, goalA, [read], unit: "km") }
        #expect(noUnit?.errorReason == "UNIT_MISMATCH" && noUnit?.message.contains("no unit") == true)
        let deleted = await expectError(.failedPrecondition) { try await Self.hold(user, goalA, [walk, old], unit: "km") }
        #expect(preconditionType(deleted) == "HABIT_DELETED")
        let stranger = try await TestUser()
        let theirs = try await stranger.createHabit("Theirs", unit: "km")
        let notFound = await expectError(.notFound) { try await Self.hold(user, goalA, [walk, theirs], unit: "km") }
        #expect(notFound?.message.contains(theirs.id) == true)
        // None of those held Walk.
        #expect(try await Self.setUnit(user, walk, "mi").unit == "mi")
        // The unit must match exactly.
        await expectError(.failedPrecondition) { try await Self.hold(user, goalA, [walk], unit: "MI") }

        // A purged account takes its holds with it.
        try await Self.hold(user, goalB, [run], unit: "mi")
        _ = try await user.fixture.internalAPI.purgeUser(.with { $0.userID = user.id.uuidString })
        let left = try await user.fixture.pool.queryRow("SELECT count(*) FROM unit_holds WHERE user_id = \(user.id)")
        #expect(try left?.decode(0, as: Int64.self) == 0)
    }

    @Test("SetUnitHolds: bad fields are INVALID_ARGUMENT naming each one; releasing needs no unit")
    func unitHoldFields() async throws {
        let user = try await TestUser()
        let run = try await user.createHabit("Run", unit: "km")
        let internalAPI = user.fixture.internalAPI
        let error = await expectError(.invalidArgument) {
            _ = try await internalAPI.setUnitHolds(
                .with {
                    $0.userID = "nobody"
                    $0.holder = ""
                    $0.habitIds = ["not-a-uuid", run.id, run.id]
                    $0.unit = ""
                })
        }
        #expect(
            Set(error?.fieldViolations.map(\.field) ?? [])
                == ["user_id", "holder", "habit_ids[0]", "habit_ids[2]", "unit"])
        await expectError(.invalidArgument, field: "holder") {
            _ = try await internalAPI.setUnitHolds(
                .with {
                    $0.userID = user.id.uuidString
                    $0.holder = String(repeating: "g", count: 101)
                    $0.habitIds = [run.id]
                    $0.unit = "km"
                })
        }
        await expectError(.invalidArgument, field: "unit") {
            _ = try await internalAPI.setUnitHolds(
                .with {
                    $0.userID = user.id.uuidString
                    $0.holder = "goal:1"
                    $0.habitIds = [run.id]
                    $0.unit = String(repeating: "k", count: 21)
                })
        }
        await expectError(.invalidArgument, field: "habit_ids") {
            _ = try await internalAPI.setUnitHolds(
                .with {
                    $0.userID = user.id.uuidString
                    $0.holder = "goal:1"
                    $0.habitIds = (0...100).map { _ in UUID().uuidString }
                    $0.unit = "km"
                })
        }
        // Releasing (no habits) ignores the unit, and works for a holder that holds nothing.
        _ = try await internalAPI.setUnitHolds(
            .with {
                $0.userID = user.id.uuidString
                $0.holder = String(repeating: "g", count: 100)
            })
        // The gateway cannot call it.
        let asGateway = Habitflow_Habits_V1_HabitsInternal.Client(transport: user.fixture.channel)
        await expectError(.permissionDenied) {
            _ = try await asGateway.setUnitHolds(
                .with {
                    $0.userID = user.id.uuidString
                    $0.holder = "goal:1"
                })
        }
    }

    @Test("a check-in dated before the habit's first week moves that week back: week views, scores and history count it")
    func checkInBeforeFirstWeek() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")  // a Wednesday of 2026-W03
        let stretch = try await user.createHabit("Stretch", target: 1)
        #expect(stretch.liveFrom == date(2026, 1, 14))
        // Last week's view, read (and cached) before: the habit did not exist yet.
        let before = try await user.week(2026, 2)
        #expect(TestUser.progress(of: stretch, in: before) == nil)
        #expect(before.score.display == "0% (0/0 habits)")
        let (_, cursor, _) = try await SyncTests.drain(user, pageSize: 100)

        let entry = try await user.markDone(stretch, on: date(2026, 1, 7), entryID: UUID().uuidString.lowercased())
        #expect(entry.date == date(2026, 1, 7))
        // A retry adds nothing.
        #expect(try await user.markDone(stretch, on: date(2026, 1, 7), entryID: entry.id).id == entry.id)

        let lastWeek = try await user.week(2026, 2)
        #expect(TestUser.progress(of: stretch, in: lastWeek) == "1/1")
        #expect(lastWeek.score.display == "100% (1/1 habits)")
        let history = try await user.api.getScoreHistory(
            .with {
                $0.startWeek = isoWeek(2026, 1)
                $0.endWeek = isoWeek(2026, 3)
            }, options: user.options
        ).weeks
        #expect(history.map(\.score.display) == ["0% (0/0 habits)", "100% (1/1 habits)", "0% (0/1 habits)"])

        // The habit counts from that day's week, with the target it was created with, and syncs as updated.
        let moved = try await user.api.getHabit(.with { $0.habitID = stretch.id }, options: user.options)
        #expect(moved.liveFrom == date(2026, 1, 7))
        #expect(moved.targetHistory.map(\.fromWeek) == [isoWeek(2026, 2)])
        #expect(moved.targetHistory.map(\.weeklyTarget) == [1])
        let changes = try await SyncTests.drain(user, from: cursor, pageSize: 100).changes
        let keys = changes.map(SyncTests.key)
        #expect(keys.contains("habit:\(stretch.id)") && keys.contains("entry:\(entry.id)"))
        #expect(keys.filter { $0.hasPrefix("entry:") }.count == 1)

        // Goal totals agree.
        let totals = try await Self.aggregate(user, [stretch])
        #expect(totals.aggregates.map { "\($0.week.week) \($0.entryCount)" } == ["2 1"])

        // A later day of this week (still before live_from, which moved) and a day in the future.
        try await user.markDone(stretch, on: date(2026, 1, 5))
        #expect(try await user.api.getHabit(.with { $0.habitID = stretch.id }, options: user.options).liveFrom
            == date(2026, 1, 5))
        #expect(TestUser.progress(of: stretch, in: try await user.week(2026, 2)) == "2/1")
        await expectError(.invalidArgument, field: "date") { try await user.markDone(stretch, on: date(2026, 1, 15)) }
        // A deleted habit stays refused, whatever the date.
        _ = try await user.delete(stretch)
        let deleted = await expectError(.failedPrecondition) { try await user.markDone(stretch, on: date(2025, 12, 1)) }
        #expect(preconditionType(deleted) == "HABIT_DELETED")
    }
}
