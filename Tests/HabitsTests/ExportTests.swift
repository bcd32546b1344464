import Foundation
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

/// `HabitsInternal/ExportUser`: everything of a user's, as a stream (categories and habits first, then entries).
@Suite("Data export")
struct ExportTests {
    typealias Message = Habitflow_Habits_V1_ExportUserResponse

    /// Every message of the user's export stream, in order.
    static func export(_ client: Habitflow_Habits_V1_HabitsInternal.Client, _ userID: String) async throws
        -> [Message]
    {
        var messages: [Message] = []
        for try await message in try await client.exportUser(.with { $0.userID = userID }) {
            messages.append(message)
        }
        return messages
    }

    static func export(_ user: TestUser) async throws -> [Message] {
        try await export(user.fixture.internalAPI, user.id.uuidString.lowercased())
    }

    /// Whether `a` comes before `b` in the export's order: date, habit, creation, then entry id.
    static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        let first = (a.date.year, a.date.month, a.date.day)
        let second = (b.date.year, b.date.month, b.date.day)
        if first != second { return first < second }
        if a.habitID != b.habitID { return a.habitID < b.habitID }
        let aCreated = (a.createTime.seconds, a.createTime.nanos)
        let bCreated = (b.createTime.seconds, b.createTime.nanos)
        if aCreated != bCreated { return aCreated < bCreated }
        return a.id < b.id
    }

    @Test("the first message holds every category and habit as the public API shows them, deleted ones included")
    func categoriesAndHabits() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-07T12:00:00Z")
        let hobbies = try await user.api.createCategory(.with { $0.name = "Hobbies" }, options: user.options)
        let read = try await user.createHabit("Read", target: 3, category: hobbies.id)
        let run = try await user.createHabit("Run", target: 2, unit: "km")
        let stretch = try await user.createHabit("Stretch")
        try await user.markDone(read, on: date(2026, 1, 5))
        try await user.markDone(run, on: date(2026, 1, 6), value: 5.5)
        try await user.markDone(stretch, on: date(2026, 1, 7))
        try user.setNow("2026-01-21T12:00:00Z")
        let changed = try await user.updateTarget(read, to: 5)
        #expect(changed.targetHistory.count == 2)
        _ = try await user.delete(stretch)
        try await user.markDone(run, on: date(2026, 1, 20))
        #expect(try await user.markNotDone(run, on: date(2026, 1, 20)) == 1)
        let gone = try await user.api.createCategory(.with { $0.name = "Gone" }, options: user.options)
        let tombstone = try await user.api.deleteCategory(.with { $0.categoryID = gone.id }, options: user.options)

        let messages = try await Self.export(user)
        let first = try #require(messages.first)
        #expect(first.entries.isEmpty)
        // Live categories in display order, as ListCategories shows them, then the deleted one.
        let live = try await user.categories()
        #expect(first.categories == live + [tombstone])
        #expect(first.categories.last?.deleted == true)
        let listed = try await user.api.listHabits(
            .with {
                $0.showDeleted = true
                $0.pageSize = 200
            }, options: user.options)
        #expect(first.habits == listed.habits)
        #expect(first.habits.map(\.id) == [read.id, run.id, stretch.id])
        #expect(first.habits[0].targetHistory.map(\.weeklyTarget) == [3, 5])
        #expect(first.habits[2].deleted)

        // The entries, the removed one included as a tombstone.
        let entries = messages.dropFirst().flatMap(\.entries)
        #expect(messages.count == 2)
        #expect(entries.map(\.date) == [date(2026, 1, 5), date(2026, 1, 6), date(2026, 1, 7), date(2026, 1, 20)])
        #expect(entries.map(\.habitID) == [read.id, run.id, stretch.id, run.id])  // the deleted habit's kept
        #expect(entries.map(\.deleted) == [false, false, false, true])
        #expect(entries[3].hasDeleteTime)
        #expect(entries[1].value == 5.5)
    }

    @Test("2,500 entries arrive in messages of at most 1,000, all of them, in order, once; no other user's")
    func entriesStreamInPages() async throws {
        let user = try await TestUser()
        var habits: [Habit] = []
        for name in ["Walk", "Swim", "Cook"] { habits.append(try await user.createHabit(name)) }
        // Two imports (two creation times); 400 (day, habit) pairs get two entries, ordered by creation then id.
        let entries = (0..<2_500).map { index in
            EntryImportTests.entry(habits[index % 3], daysAgo: index % 700, value: Double(index % 7))
        }
        #expect(try await EntryImportTests.importEntries(user, Array(entries[..<1_500])).importedEntries == 1_500)
        #expect(try await EntryImportTests.importEntries(user, Array(entries[1_500...])).importedEntries == 1_000)
        let other = try await TestUser()
        let theirs = try await other.createHabit("Walk")
        let theirEntries = (0..<5).map { EntryImportTests.entry(theirs, daysAgo: $0) }
        _ = try await EntryImportTests.importEntries(other, theirEntries)

        let messages = try await Self.export(user)
        #expect(messages.count >= 3)
        #expect(messages.count == 4)  // categories and habits, then 1,000, 1,000 and 500 entries
        #expect(messages.first?.entries.isEmpty == true)
        #expect(messages.dropFirst().allSatisfy { (1...1_000).contains($0.entries.count) })
        #expect(messages.dropFirst().allSatisfy { $0.categories.isEmpty && $0.habits.isEmpty })
        let exported = messages.flatMap(\.entries)
        #expect(exported.count == 2_500)
        #expect(Set(exported.map(\.id)).count == exported.count)
        #expect(Set(exported.map(\.id)) == Set(entries.map(\.entryID)))
        #expect(Set(exported.map(\.id)).isDisjoint(with: theirEntries.map(\.entryID)))
        #expect(zip(exported, exported.dropFirst()).allSatisfy { Self.precedes($0, $1) })
        let imported = Dictionary(uniqueKeysWithValues: entries.map { ($0.entryID, $0) })
        #expect(
            exported.allSatisfy { entry in
                let source = imported[entry.id]
                return source?.habitID == entry.habitID && source?.date == entry.date && source?.value == entry.value
                    && !entry.deleted
            })
        // Pairs imported twice on one day: the first import's entry first.
        let firstImport = Set(entries[..<1_500].map(\.entryID))
        for (earlier, later) in zip(exported, exported.dropFirst())
        where earlier.date == later.date && earlier.habitID == later.habitID && earlier.createTime != later.createTime {
            #expect(firstImport.contains(earlier.id) && !firstImport.contains(later.id))
        }
    }

    @Test("refused to calls the gateway forwards and to a bad user_id; an unknown user gets one empty message")
    func refusalsAndUnknownUsers() async throws {
        let user = try await TestUser()
        _ = try await user.createHabit("Journal")
        let asGateway = Habitflow_Habits_V1_HabitsInternal.Client(transport: user.fixture.channel)
        await expectError(.permissionDenied) { _ = try await Self.export(asGateway, user.id.uuidString.lowercased()) }
        let internalAPI = user.fixture.internalAPI
        await expectError(.invalidArgument, field: "user_id") { _ = try await Self.export(internalAPI, "x") }
        await expectError(.invalidArgument, field: "user_id") { _ = try await Self.export(internalAPI, "") }

        // Nobody is created for an export (a new user would get the five default categories).
        let stranger = UUID()
        let nothing = try await Self.export(internalAPI, stranger.uuidString.lowercased())
        #expect(nothing == [Message()])
        #expect(try await user.fixture.pool.queryRow("SELECT 1 FROM users WHERE user_id = \(stranger)") == nil)

        // A purged account is refused, as goals refuses it.
        _ = try await internalAPI.purgeUser(.with { $0.userID = user.id.uuidString.lowercased() })
        let purged = await expectError(.failedPrecondition) { _ = try await Self.export(user) }
        #expect(preconditionType(purged) == "ACCOUNT_DELETED")
    }
}
