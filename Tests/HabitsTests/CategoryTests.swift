import Foundation
import HabitFlowEvents
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowTestSupport
import Testing

/// Seed 004 §3.2: categories.
@Suite("Categories")
struct CategoryTests {
    @Test("a new user has the five default categories, in order")
    func defaults() async throws {
        let user = try await TestUser()
        let categories = try await user.categories()
        #expect(categories.map(\.name) == ["Career", "Health", "Family", "Finances", "Wisdom"])
        #expect(categories.map(\.position) == [0, 1, 2, 3, 4])
        #expect(categories.allSatisfy { $0.isDefault })
        // Asking again creates nothing more.
        #expect(try await user.categories().map(\.id) == categories.map(\.id))
    }

    @Test("create, rename and reorder; names are unique ignoring case; at most 10")
    func createRenameReorder() async throws {
        let user = try await TestUser()
        let hobbies = try await user.api.createCategory(.with { $0.name = "  Hobbies " }, options: user.options)
        #expect(hobbies.name == "Hobbies")
        #expect(hobbies.position == 5)
        #expect(!hobbies.isDefault)

        await expectError(.alreadyExists) {
            _ = try await user.api.createCategory(.with { $0.name = "hobbies" }, options: user.options)
        }
        let renamed = try await user.api.renameCategory(
            .with {
                $0.categoryID = hobbies.id
                $0.name = "Fun"
            }, options: user.options)
        #expect(renamed.name == "Fun")
        await expectError(.alreadyExists) {
            _ = try await user.api.renameCategory(
                .with {
                    $0.categoryID = hobbies.id
                    $0.name = "HEALTH"
                }, options: user.options)
        }
        // A case-only rename of itself is fine.
        #expect(
            try await user.api.renameCategory(
                .with {
                    $0.categoryID = hobbies.id
                    $0.name = "FUN"
                }, options: user.options
            ).name == "FUN")

        let before = try await user.categories()
        let reordered = try await user.api.reorderCategories(
            .with { $0.categoryIds = [hobbies.id, before[2].id] }, options: user.options)
        #expect(reordered.categories.map(\.name) == ["FUN", "Family", "Career", "Health", "Finances", "Wisdom"])
        #expect(reordered.categories.map(\.position) == [0, 1, 2, 3, 4, 5])
        await expectError(.invalidArgument, field: "category_ids[1]") {
            _ = try await user.api.reorderCategories(
                .with { $0.categoryIds = [hobbies.id, hobbies.id] }, options: user.options)
        }
        await expectError(.notFound) {
            _ = try await user.api.reorderCategories(
                .with { $0.categoryIds = [UUID().uuidString] }, options: user.options)
        }

        for index in 7...10 {
            _ = try await user.api.createCategory(.with { $0.name = "Extra \(index)" }, options: user.options)
        }
        #expect(try await user.categories().count == 10)
        let error = await expectError(.failedPrecondition) {
            _ = try await user.api.createCategory(.with { $0.name = "Eleventh" }, options: user.options)
        }
        #expect(preconditionType(error) == "CATEGORY_LIMIT")
    }

    @Test("names: required, at most 50 characters, no control characters")
    func nameRules() async throws {
        let user = try await TestUser()
        for bad in ["", "   ", String(repeating: "x", count: 51), "Tab\tName"] {
            await expectError(.invalidArgument, field: "name") {
                _ = try await user.api.createCategory(.with { $0.name = bad }, options: user.options)
            }
        }
        let longest = String(repeating: "é", count: 50)
        #expect(try await user.api.createCategory(.with { $0.name = longest }, options: user.options).name == longest)
    }

    @Test("deleting a category moves its habits to Uncategorized and publishes CategoryDeleted")
    func deleteWithHabits() async throws {
        let user = try await TestUser()
        let career = try #require(try await user.categories().first)
        let habit = try await user.createHabit("Network", category: career.id)
        let other = try await user.createHabit("Other")
        #expect(habit.categoryID == career.id)

        let tombstone = try await user.api.deleteCategory(.with { $0.categoryID = career.id }, options: user.options)
        #expect(tombstone.deleted)
        #expect(tombstone.hasDeleteTime)
        #expect(try await user.categories().map(\.name) == ["Health", "Family", "Finances", "Wisdom"])
        let moved = try await user.api.getHabit(.with { $0.habitID = habit.id }, options: user.options)
        #expect(moved.categoryID.isEmpty)
        #expect(try await user.api.getHabit(.with { $0.habitID = other.id }, options: user.options).categoryID.isEmpty)
        #expect(try await user.week().categoryScores.last?.categoryName == "Uncategorized")
        // Deleting again returns the tombstone; the name is free again; a deleted category takes no habits.
        #expect(try await user.api.deleteCategory(.with { $0.categoryID = career.id }, options: user.options) == tombstone)
        await expectError(.notFound) { _ = try await user.createHabit("Mentor", category: career.id) }
        await expectError(.notFound) {
            _ = try await user.api.renameCategory(
                .with {
                    $0.categoryID = career.id
                    $0.name = "Work"
                }, options: user.options)
        }
        #expect(try await user.api.createCategory(.with { $0.name = "Career" }, options: user.options).name == "Career")

        let payload = try #require(
            try await user.fixture.published("habitflow.events.v1.CategoryDeleted", aggregateID: career.id))
        let event = try Habitflow_Events_V1_CategoryDeleted(serializedBytes: payload)
        #expect(event.userID == user.id.uuidString.lowercased())
        #expect(event.categoryID == career.id)
    }

    @Test("a repeated create with the same client id returns the first category")
    func idempotentCreate() async throws {
        let user = try await TestUser()
        let id = UUID().uuidString.lowercased()
        let first = try await user.api.createCategory(
            .with {
                $0.categoryID = id
                $0.name = "Travel"
            }, options: user.options)
        let retry = try await user.api.createCategory(
            .with {
                $0.categoryID = id
                $0.name = "Travel (retry)"
            }, options: user.options)
        #expect(first.id == id)
        #expect(retry == first)
        #expect(try await user.categories().count == 6)
    }
}
