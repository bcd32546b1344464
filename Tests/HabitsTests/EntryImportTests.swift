import HabitFlowCalendar
import Foundation
import HabitFlowHabits
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowServiceKit
import SwiftProtobuf
import Testing
import HabitFlowTestSupport

/// `HabitsInternal/ImportEntries`: bulk history for seeding and imports, all or nothing, idempotent by entry id.
@Suite("Entry import")
struct EntryImportTests {
    /// The user's day `daysAgo` days before today. Imports read the real clock (internal calls name no caller user),
    /// and test users live in UTC.
    static func day(_ daysAgo: Int) -> LocalDate {
        LocalDate(daysSinceEpoch: Int((Date().timeIntervalSince1970 / 86_400).rounded(.down)) - daysAgo)
    }

    static func entry(_ habit: Habit, daysAgo: Int, value: Double? = nil, id: UUID = UUID())
        -> Habitflow_Habits_V1_ImportedEntry
    {
        let local = day(daysAgo)
        return .with {
            $0.entryID = id.uuidString.lowercased()
            $0.habitID = habit.id
            $0.date = date(Int32(local.year), Int32(local.month), Int32(local.day))
            if let value { $0.value = value }
        }
    }

    static func importEntries(_ user: TestUser, _ entries: [Habitflow_Habits_V1_ImportedEntry]) async throws
        -> Habitflow_Habits_V1_ImportEntriesResponse
    {
        try await user.fixture.internalAPI.importEntries(
            .with {
                $0.userID = user.id.uuidString.lowercased()
                $0.entries = entries
            })
    }

    /// Every entry row of the user, tombstones included, and the user's change sequence.
    static func stored(_ user: TestUser) async throws -> (entries: Int64, changeSequence: Int64) {
        let pool = user.fixture.pool
        let entries = try await pool.queryRow("SELECT count(*) FROM entries WHERE user_id = \(user.id)")?
            .decode(0, as: Int64.self)
        let sequence = try await pool.queryRow("SELECT change_seq FROM users WHERE user_id = \(user.id)")?
            .decode(0, as: Int64.self)
        return (try #require(entries), try #require(sequence))
    }

    @Test("a batch adds every entry in one write; the habit counts from its earliest entry's week on")
    func importsABatch() async throws {
        let user = try await TestUser()
        let read = try await user.createHabit("Read", target: 3)
        let run = try await user.createHabit("Run", target: 2, unit: "km")
        // A week view read (and cached) before the import must not be served stale after it.
        #expect(TestUser.progress(of: read, in: try await user.week()) == "0/3")
        let before = try await Self.stored(user)
        let oldest = Self.day(400)
        let entries = [
            Self.entry(read, daysAgo: 400), Self.entry(read, daysAgo: 399), Self.entry(read, daysAgo: 0),
            Self.entry(run, daysAgo: 30, value: 5.25), Self.entry(run, daysAgo: 30, value: 0),
        ]
        let response = try await Self.importEntries(user, entries)
        #expect(response.importedEntries == 5 && response.existingEntries == 0)
        let after = try await Self.stored(user)
        #expect(after.entries == before.entries + 5)
        // One change-sequence value for the whole batch, stamped on every row it wrote.
        #expect(after.changeSequence == before.changeSequence + 1)
        let stamps = try await user.fixture.pool.query(
            "SELECT DISTINCT change_seq FROM entries WHERE user_id = \(user.id)"
        ).map { try $0.decode(0, as: Int64.self) }
        #expect(stamps == [after.changeSequence])
        let thisWeek = IsoWeek(containing: Self.day(0))
        let doneThisWeek = [Self.day(0), Self.day(399), Self.day(400)].filter(thisWeek.contains).count
        #expect(TestUser.progress(of: read, in: try await user.week()) == "\(doneThisWeek)/3")

        // The entries read back as MarkHabitDone's would, values included.
        let listed = try await user.api.listEntries(
            .with {
                $0.startDate = date(Int32(oldest.year), Int32(oldest.month), Int32(oldest.day))
                let today = Self.day(0)
                $0.endDate = date(Int32(today.year), Int32(today.month), Int32(today.day))
            }, options: user.options
        ).entries
        #expect(Set(listed.map(\.id)) == Set(entries.map(\.entryID)))
        #expect(listed.filter { $0.habitID == run.id }.map(\.value).sorted() == [0, 5.25])

        // Read now counts from the week of its oldest entry, with the target it was created with; Run from its own.
        let oldestWeek = IsoWeek(containing: oldest)
        let moved = try await user.api.getHabit(.with { $0.habitID = read.id }, options: user.options)
        #expect(moved.liveFrom == date(Int32(oldest.year), Int32(oldest.month), Int32(oldest.day)))
        #expect(moved.targetHistory.map(\.weeklyTarget) == [3])
        #expect(moved.targetHistory.first?.fromWeek == isoWeek(Int32(oldestWeek.year), Int32(oldestWeek.week)))
        let view = try await user.week(Int32(oldestWeek.year), Int32(oldestWeek.week))
        let expectedInOldestWeek = [oldest, Self.day(399)].filter(oldestWeek.contains).count
        #expect(TestUser.progress(of: read, in: view) == "\(expectedInOldestWeek)/3")
        #expect(TestUser.progress(of: run, in: view) == nil, "Run is not live 400 days ago")

        // Score history across the imported weeks counts the habit where it is live.
        let history = try await user.api.getScoreHistory(
            .with {
                $0.startWeek = isoWeek(Int32(oldestWeek.year), Int32(oldestWeek.week))
                $0.endWeek = isoWeek(Int32(oldestWeek.year), Int32(oldestWeek.week))
            }, options: user.options
        ).weeks
        #expect(history.map(\.score.totalHabits) == [1])

        // The change feed carries the entries and the moved habit.
        let changes = try await SyncTests.drain(user, pageSize: 1000).changes
        let keys = Set(changes.map(SyncTests.key))
        #expect(entries.allSatisfy { keys.contains("entry:\($0.entryID)") })
        let fedHabit = changes.compactMap { change -> Habit? in
            if case .habit(let habit) = change.resource, habit.id == read.id { return habit }
            return nil
        }
        #expect(fedHabit.last?.liveFrom == moved.liveFrom)
    }

    @Test("a retried batch adds nothing; a later batch sharing ids adds only the new ones")
    func idempotentRetries() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Stretch")
        let batch = (1...50).map { Self.entry(habit, daysAgo: $0) }
        let first = try await Self.importEntries(user, batch)
        #expect(first.importedEntries == 50 && first.existingEntries == 0)
        let afterFirst = try await Self.stored(user)

        let retried = try await Self.importEntries(user, batch)
        #expect(retried.importedEntries == 0 && retried.existingEntries == 50)
        #expect(try await Self.stored(user).entries == afterFirst.entries)

        // Across batches: 10 ids seen before (skipped, even with other dates) and 5 new ones.
        let overlapping = batch.prefix(10).map { old in
            var moved = old
            moved.date = date(2020, 1, 1)
            return moved
        } + (60...64).map { Self.entry(habit, daysAgo: $0) }
        let second = try await Self.importEntries(user, Array(overlapping))
        #expect(second.importedEntries == 5 && second.existingEntries == 10)
        #expect(try await Self.stored(user).entries == afterFirst.entries + 5)
        // An id MarkHabitDone wrote counts as existing too.
        let marked = try await user.markDone(habit, entryID: UUID().uuidString.lowercased())
        var again = Self.entry(habit, daysAgo: 3)
        again.entryID = marked.id
        let third = try await Self.importEntries(user, [again])
        #expect(third.importedEntries == 0 && third.existingEntries == 1)
    }

    @Test("bad entries are INVALID_ARGUMENT naming each one, and nothing of the batch is written")
    func invalidEntries() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Swim")
        let before = try await Self.stored(user)
        let good = Self.entry(habit, daysAgo: 5)

        // Duplicate ids within one batch.
        var duplicate = Self.entry(habit, daysAgo: 6)
        duplicate.entryID = good.entryID
        await expectError(.invalidArgument, field: "entries[1].entry_id") {
            _ = try await Self.importEntries(user, [good, duplicate])
        }
        // A date after the user's today, a bad calendar date, a missing one.
        await expectError(.invalidArgument, field: "entries[1].date") {
            _ = try await Self.importEntries(user, [good, Self.entry(habit, daysAgo: -2)])
        }
        var impossible = Self.entry(habit, daysAgo: 1)
        impossible.date = date(2025, 2, 30)
        var undated = Self.entry(habit, daysAgo: 1)
        undated.clearDate()
        let dates = await expectError(.invalidArgument, field: "entries[0].date") {
            _ = try await Self.importEntries(user, [impossible, undated])
        }
        #expect(dates?.fieldViolations.map(\.field) == ["entries[0].date", "entries[1].date"])
        // Values outside MarkHabitDone's range.
        for value in [-1, 1_000_000_001, Double.nan, Double.infinity] {
            await expectError(.invalidArgument, field: "entries[1].value") {
                _ = try await Self.importEntries(user, [good, Self.entry(habit, daysAgo: 7, value: value)])
            }
        }
        // Ids: missing, not UUIDs, the nil UUID.
        var unnamed = Self.entry(habit, daysAgo: 8)
        unnamed.entryID = ""
        var badHabit = Self.entry(habit, daysAgo: 8)
        badHabit.habitID = "not-a-uuid"
        let nilID = Self.entry(habit, daysAgo: 8, id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        let ids = await expectError(.invalidArgument) {
            _ = try await Self.importEntries(user, [unnamed, badHabit, nilID])
        }
        #expect(
            ids?.fieldViolations.map(\.field) == ["entries[0].entry_id", "entries[1].habit_id", "entries[2].entry_id"])
        // Empty and oversize batches.
        await expectError(.invalidArgument, field: "entries") { _ = try await Self.importEntries(user, []) }
        let oversize = (0...10_000).map { _ in good }
        await expectError(.invalidArgument, field: "entries") { _ = try await Self.importEntries(user, oversize) }
        // Many bad entries: the first 20 described, the rest counted, so the details stay small.
        let many = (0..<30).map { Self.entry(habit, daysAgo: -2 - $0) }
        let capped = await expectError(.invalidArgument, field: "entries") {
            _ = try await Self.importEntries(user, many)
        }
        #expect(capped?.fieldViolations.count == 21)
        #expect(capped?.fieldViolations.last?.description.contains("30 entries are invalid") == true)
        // A bad user id.
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await user.fixture.internalAPI.importEntries(.with { $0.userID = "x"; $0.entries = [good] })
        }

        #expect(try await Self.stored(user) == before)
    }

    @Test("another user's habit is NOT_FOUND, a deleted one FAILED_PRECONDITION; the batch writes nothing")
    func habitsMustBeTheUsersAndLive() async throws {
        let user = try await TestUser()
        let other = try await TestUser()
        let mine = try await user.createHabit("Mine")
        let theirs = try await other.createHabit("Theirs")
        let before = try await Self.stored(user)
        let notFound = await expectError(.notFound) {
            _ = try await Self.importEntries(user, [Self.entry(mine, daysAgo: 1), Self.entry(theirs, daysAgo: 1)])
        }
        #expect(notFound?.message.contains(theirs.id) == true, "\(String(describing: notFound))")

        let archived = try await user.createHabit("Archived")
        _ = try await user.delete(archived)
        let deleted = await expectError(.failedPrecondition) {
            _ = try await Self.importEntries(user, [Self.entry(mine, daysAgo: 2), Self.entry(archived, daysAgo: 2)])
        }
        #expect(preconditionType(deleted) == "HABIT_DELETED")
        #expect(try await Self.stored(user).entries == before.entries)
        #expect(try await Self.stored(other).entries == 0)

        // A user the service does not know has no habits.
        await expectError(.notFound) {
            _ = try await user.fixture.internalAPI.importEntries(
                .with {
                    $0.userID = UUID().uuidString.lowercased()
                    $0.entries = [Self.entry(mine, daysAgo: 1)]
                })
        }
        // Calls signed as the gateway are refused (it never routes internal services anyway).
        let asGateway = Habitflow_Habits_V1_HabitsInternal.Client(transport: user.fixture.channel)
        await expectError(.permissionDenied) {
            _ = try await asGateway.importEntries(
                .with {
                    $0.userID = user.id.uuidString.lowercased()
                    $0.entries = [Self.entry(mine, daysAgo: 1)]
                })
        }
    }
}
