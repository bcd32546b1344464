import Foundation
import HabitFlowHabitsProtos
import HabitFlowRPC
import Testing
import HabitFlowTestSupport

/// The change feed and paginated lists, for offline clients.
@Suite("Change feed and pagination")
struct SyncTests {
    /// Every change after `cursor`, page by page; returns them and the cursor to keep.
    static func drain(_ user: TestUser, from cursor: String = "", pageSize: Int32) async throws
        -> (changes: [Habitflow_Habits_V1_Change], cursor: String, pages: Int)
    {
        var changes: [Habitflow_Habits_V1_Change] = []
        var cursor = cursor
        var pages = 0
        while true {
            let page = try await user.api.listChanges(
                .with {
                    $0.cursor = cursor
                    $0.pageSize = pageSize
                }, options: user.options)
            pages += 1
            #expect(page.changes.count <= Int(pageSize))
            changes += page.changes
            cursor = page.nextCursor
            if !page.hasMore_p { return (changes, cursor, pages) }
            try #require(pages < 100, "the feed does not end")
        }
    }

    static func key(_ change: Habitflow_Habits_V1_Change) -> String {
        switch change.resource {
        case .category(let category): "category:\(category.id)"
        case .habit(let habit): "habit:\(habit.id)"
        case .entry(let entry): "entry:\(entry.id)"
        case nil: "none"
        }
    }

    @Test("a full sync pages through every resource once, tombstones included; later syncs get only what changed")
    func changeFeed() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let categories = try await user.categories()
        let habit = try await user.createHabit("Sync", category: categories[0].id)
        let second = try await user.createHabit("Other")
        let entry = try await user.markDone(habit)
        try await user.markDone(second, on: date(2026, 1, 13))
        // One write stamping several rows with one sequence value: the category and its habit.
        _ = try await user.api.deleteCategory(.with { $0.categoryID = categories[0].id }, options: user.options)
        try await user.markNotDone(habit)

        let full = try await Self.drain(user, pageSize: 2)
        let keys = full.changes.map(Self.key)
        #expect(Set(keys).count == keys.count, "each resource once: \(keys)")
        #expect(keys.count == 5 + 2 + 2)
        #expect(full.pages == 5)
        let deletedCategory = try #require(full.changes.first { $0.category.id == categories[0].id })
        #expect(deletedCategory.deleted)
        #expect(full.changes.first { $0.entry.id == entry.id }?.deleted == true)
        #expect(full.changes.first { $0.habit.id == habit.id }?.habit.categoryID.isEmpty == true)
        // The same feed in one page comes in the same order.
        let single = try await Self.drain(user, pageSize: 1000)
        #expect(single.changes.map(Self.key) == keys)
        #expect(single.cursor == full.cursor)

        // Nothing new: an empty page and the same cursor.
        let idle = try await Self.drain(user, from: full.cursor, pageSize: 2)
        #expect(idle.changes.isEmpty)
        #expect(idle.cursor == full.cursor)

        let renamed = try await user.api.updateHabit(
            .with {
                $0.habit.id = second.id
                $0.habit.name = "Renamed"
                $0.updateMask.paths = ["name"]
            }, options: user.options)
        let later = try await Self.drain(user, from: full.cursor, pageSize: 2)
        #expect(later.changes.map(\.habit) == [renamed])
    }

    @Test("habits and entries page with opaque tokens")
    func listPagination() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        var created: [Habit] = []
        for index in 1...5 { created.append(try await user.createHabit("Habit \(index)")) }
        _ = try await user.delete(created[4])

        var seen: [String] = []
        var token = ""
        repeat {
            let page = try await user.api.listHabits(
                .with {
                    $0.pageSize = 2
                    $0.pageToken = token
                }, options: user.options)
            seen += page.habits.map(\.id)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(seen == created.prefix(4).map(\.id))
        let all = try await user.api.listHabits(.with { $0.showDeleted = true }, options: user.options).habits
        #expect(all.map(\.id) == created.map(\.id))
        // A token is tied to its list.
        let page = try await user.api.listHabits(.with { $0.pageSize = 1 }, options: user.options)
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await user.api.listHabits(
                .with {
                    $0.showDeleted = true
                    $0.pageToken = page.nextPageToken
                }, options: user.options)
        }
        // A token edited by hand (the position inside changed) is refused, not followed.
        var edited = Array(page.nextPageToken.utf8)
        edited[edited.count / 2] = edited[edited.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await user.api.listHabits(
                .with { $0.pageToken = String(decoding: edited, as: UTF8.self) }, options: user.options)
        }

        for day in Int32(1)...14 { try await user.markDone(created[0], on: date(2026, 1, day)) }
        try await user.markDone(created[1], on: date(2026, 1, 5))
        var dates: [Habitflow_Habits_V1_LocalDate] = []
        token = ""
        repeat {
            let page = try await user.api.listEntries(
                .with {
                    $0.startDate = date(2026, 1, 3)
                    $0.endDate = date(2026, 1, 10)
                    $0.pageSize = 3
                    $0.pageToken = token
                }, options: user.options)
            dates += page.entries.map(\.date)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(dates.count == 9)
        #expect(dates.first == date(2026, 1, 3))
        #expect(dates.last == date(2026, 1, 10))
    }
}
