import Foundation
import HabitFlowEvents
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowSocial
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Testing

@Suite("Sharing settings")
struct SharingTests {
    @Test("A user who never changed anything shares the weekly score, no category, and is not private")
    func defaults() async throws {
        let user = try await TestUser()
        let settings = try await user.sharing()
        #expect(settings.shareWeeklyScore)
        #expect(!settings.privateMode)
        #expect(settings.sharedCategoryIds.isEmpty)
        #expect(!settings.hasUpdateTime)
    }

    @Test("Each path changes its field only; the chosen categories keep their order")
    func updateEachPath() async throws {
        let user = try await TestUser()
        let health = try await user.habitCategory("Health").id
        let career = try await user.habitCategory("Career").id

        let off = try await user.updateSharing(["share_weekly_score"]) { $0.shareWeeklyScore = false }
        #expect(!off.shareWeeklyScore)
        #expect(!off.privateMode)
        #expect(off.hasUpdateTime)

        let categories = try await user.updateSharing(["shared_category_ids"]) {
            $0.sharedCategoryIds = [health, career]
            $0.privateMode = true  // not in the mask: ignored
        }
        #expect(categories.sharedCategoryIds == [health, career])
        #expect(!categories.shareWeeklyScore)
        #expect(!categories.privateMode)

        let both = try await user.updateSharing(["private_mode", "share_weekly_score"]) {
            $0.privateMode = true
            $0.shareWeeklyScore = true
        }
        #expect(both.privateMode)
        #expect(both.shareWeeklyScore)
        #expect(both.sharedCategoryIds == [health, career])

        let reordered = try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [career] }
        #expect(reordered.sharedCategoryIds == [career])
        let read = try await user.sharing()
        #expect(read.sharedCategoryIds == [career])
        #expect(read.privateMode && read.shareWeeklyScore)

        let cleared = try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [] }
        #expect(cleared.sharedCategoryIds.isEmpty)
    }

    @Test("Bad masks, ids, repeats and too many categories are INVALID_ARGUMENT naming the field")
    func badRequests() async throws {
        let user = try await TestUser()
        let health = try await user.habitCategory("Health").id
        await expectError(.invalidArgument, field: "update_mask") {
            try await user.updateSharing([]) { $0.privateMode = true }
        }
        await expectError(.invalidArgument, field: "update_mask.paths[1]") {
            try await user.updateSharing(["private_mode", "update_time"]) { $0.privateMode = true }
        }
        await expectError(.invalidArgument, field: "settings.shared_category_ids[1]") {
            try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [health, "health"] }
        }
        await expectError(.invalidArgument, field: "settings.shared_category_ids[1]") {
            try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [health, health] }
        }
        await expectError(.invalidArgument, field: "settings.shared_category_ids") {
            try await user.updateSharing(["shared_category_ids"]) {
                $0.sharedCategoryIds = (0...10).map { _ in UUID().uuidString.lowercased() }
            }
        }
        // Nothing changed.
        #expect(!(try await user.sharing().privateMode))
    }

    @Test("Another user's category, or one nobody has, is NOT_FOUND naming it")
    func categoriesNotFound() async throws {
        let user = try await TestUser()
        let other = try await TestUser()
        let theirs = try await other.habitCategory("Health").id
        let mine = try await user.habitCategory("Health").id
        let error = await expectError(.notFound) {
            try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [mine, theirs] }
        }
        #expect(error?.message.contains(theirs) == true, "\(String(describing: error))")
        let unknown = UUID().uuidString.lowercased()
        let second = await expectError(.notFound) {
            try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [unknown] }
        }
        #expect(second?.message.contains(unknown) == true)

        // A category deleted in habits is no longer live.
        let career = try await user.habitCategory("Career").id
        _ = try await user.habits.deleteCategory(.with { $0.categoryID = career }, options: user.options)
        await expectError(.notFound) {
            try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [career] }
        }
        #expect(try await user.sharing().sharedCategoryIds.isEmpty)
    }

    @Test("A deleted category drops out of the shared ones, and a settings update racing with it is refused")
    func deletedCategoryDropsOut() async throws {
        let user = try await TestUser()
        let health = try await user.habitCategory("Health").id
        let family = try await user.habitCategory("Family").id
        try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [health, family] }

        // Habits publishes CategoryDeleted (its relay does not run here: delivered as it would be, twice).
        var deleted = Habitflow_Events_V1_CategoryDeleted()
        deleted.userID = user.userID
        deleted.categoryID = health
        for _ in 0..<2 {
            try await user.fixture.deliver(
                deleted, aggregate: ("category", health), source: "habits", to: [user.fixture.socialInternalChannel])
        }
        #expect(try await user.sharing().sharedCategoryIds == [family])

        // Habits still answers it as live (the event came first): the update is refused all the same.
        await expectError(.notFound) {
            try await user.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [family, health] }
        }
        #expect(try await user.sharing().sharedCategoryIds == [family])
    }
}
