import Foundation
import HabitFlowEvents
import HabitFlowGoalsProtos
import HabitFlowRPC
import HabitFlowTestSupport
import Testing

/// Limits, hierarchy, idempotency, ownership, events and bad input, over real gRPC and real Postgres.
@Suite struct RulesTests {
    @Test func theEleventhActiveGoalIsRefusedAndACompletedOneFreesASlot() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        var goals: [Goal] = []
        for index in 1...10 {
            goals.append(try await user.createGoal("Goal \(index)", type: .count, target: 10))
        }
        _ = try await user.goals.pauseGoal(.with { $0.goalID = goals[0].id }, options: user.options)
        let refused = await expectError(.failedPrecondition) {
            _ = try await user.createGoal("Goal 11", type: .count, target: 10)
        }
        #expect(preconditionType(refused) == "ACTIVE_GOAL_LIMIT")
        #expect(refused?.message.contains("free a slot") == true)
        // Completing one by hand frees its slot; restoring it is refused while the slots are full again.
        _ = try await user.goals.completeGoal(.with { $0.goalID = goals[1].id }, options: user.options)
        let eleventh = try await user.createGoal("Goal 11", type: .count, target: 10)
        #expect(eleventh.status == .notStarted)
        await expectError(.failedPrecondition) {
            _ = try await user.goals.restoreGoal(.with { $0.goalID = goals[1].id }, options: user.options)
        }
        // A goal completed by its progress holds no slot either.
        let habit = try await user.createHabit("Tick")
        _ = try await user.goals.deleteGoal(.with { $0.goalID = eleventh.id }, options: user.options)
        let small = try await user.createGoal("Tick once", type: .count, target: 1, habits: [habit])
        try await user.checkIn(habit)
        #expect(try await user.goal(small).status == .completed)
        _ = try await user.createGoal("Goal 12", type: .count, target: 10)
    }

    @Test func aParentNeedsALongerHorizon() async throws {
        let user = try await TestUser()
        let year = try await user.createGoal("Healthy year", type: .count, target: 100, horizon: .fiveYears)
        let quarter = try await user.createGoal("Quarter", type: .count, target: 10, horizon: .twelveWeeks) {
            $0.parentGoalID = year.id
        }
        #expect(quarter.parentGoalID == year.id)
        let refused = await expectError(.failedPrecondition) {
            _ = try await user.createGoal("Decade", type: .count, target: 10, horizon: .tenYears) {
                $0.parentGoalID = quarter.id
            }
        }
        #expect(preconditionType(refused) == "PARENT_HORIZON")
        await expectError(.failedPrecondition) {
            _ = try await user.createGoal("Same", type: .count, target: 10, horizon: .twelveWeeks) {
                $0.parentGoalID = quarter.id
            }
        }
        // Archiving the parent detaches its child; the child stays.
        _ = try await user.goals.archiveGoal(.with { $0.goalID = year.id }, options: user.options)
        #expect(try await user.goal(quarter).parentGoalID == "")
        #expect(try await user.goal(year).status == .archived)
        #expect(try await user.list().map(\.id) == [quarter.id])
        // Another user's goal is no parent of mine.
        let other = try await TestUser()
        let theirs = try await other.createGoal("Theirs", type: .count, target: 10, horizon: .ongoing)
        await expectError(.notFound) {
            _ = try await user.createGoal("Mine", type: .count, target: 10, horizon: .oneWeek) {
                $0.parentGoalID = theirs.id
            }
        }
    }

    @Test func aRepeatedCreateReturnsTheFirstGoal() async throws {
        let user = try await TestUser()
        let id = UUID().uuidString.lowercased()
        let first = try await user.createGoal("Once", type: .count, target: 5) { $0.goalID = id }
        let again = try await user.createGoal("Once, retried", type: .count, target: 5) { $0.goalID = id }
        #expect(first.id == id)
        #expect(again.title == "Once")
        #expect(try await user.list().count == 1)
    }

    @Test func anotherUsersGoalIsNotFound() async throws {
        let owner = try await TestUser()
        let stranger = try await TestUser()
        let goal = try await owner.createGoal("Private", type: .count, target: 5)
        await expectError(.notFound) { _ = try await stranger.goal(goal) }
        await expectError(.notFound) {
            _ = try await stranger.goals.deleteGoal(.with { $0.goalID = goal.id }, options: stranger.options)
        }
        let habit = try await stranger.createHabit("Theirs")
        await expectError(.notFound) { _ = try await owner.link(habit, to: goal) }
        #expect(try await owner.goal(goal).links.isEmpty)
    }

    @Test func aDeletedCategoryInHabitsReachesGoals() async throws {
        let user = try await TestUser()
        let categories = try await user.habits.listCategories(.init(), options: user.options).categories
        let health = try #require(categories.first { $0.name == "Health" })
        let career = try #require(categories.first { $0.name == "Career" })
        let inHealth = try await user.createGoal("Run", type: .count, target: 5) { $0.categoryID = health.id }
        let inCareer = try await user.createGoal("Ship", type: .count, target: 5) { $0.categoryID = career.id }
        let loose = try await user.createGoal("Loose", type: .count, target: 5)
        // Listed in the user's category order (Career before Health), Uncategorized last.
        #expect(try await user.list().map(\.id) == [inCareer.id, inHealth.id, loose.id])
        _ = try await user.habits.deleteCategory(.with { $0.categoryID = health.id }, options: user.options)
        #expect(try await eventually { try await user.goal(inHealth).categoryID == "" })
        await expectError(.notFound) {
            _ = try await user.createGoal("Late", type: .count, target: 5) { $0.categoryID = health.id }
        }
        await expectError(.notFound) {
            _ = try await user.createGoal("Unknown", type: .count, target: 5) { $0.categoryID = UUID().uuidString.lowercased() }
        }
    }

    /// Sharing asks social for the partner; with social down its error reaches the client and nothing is created
    /// (NO_PARTNER with social up: SocialTests/SharedGoalsTests).
    @Test func sharingNeedsSocial() async throws {
        let user = try await TestUser()
        let goalID = UUID().uuidString.lowercased()
        await expectError(.unavailable) {
            _ = try await user.createGoal("Together", type: .count, target: 5) {
                $0.goalID = goalID
                $0.shared = true
            }
        }
        await expectError(.notFound) { _ = try await user.goals.getGoal(.with { $0.goalID = goalID }, options: user.options) }
    }

    @Test func badInputNamesEveryField() async throws {
        let user = try await TestUser()
        let error = await expectError(.invalidArgument) {
            _ = try await user.goals.createGoal(
                .with {
                    $0.goalID = "not-a-uuid"
                    $0.title = String(repeating: "x", count: 101)
                    $0.description_p = String(repeating: "y", count: 501)
                    $0.icon = "ab"
                    $0.target.value = 0
                    $0.target.unit = "km"
                }, options: user.options)
        }
        let fields = Set(error?.fieldViolations.map(\.field) ?? [])
        #expect(fields.isSuperset(of: ["goal_id", "title", "description", "icon", "type", "horizon", "target.unit"]))
        await expectError(.invalidArgument, field: "target.value") {
            _ = try await user.createGoal("Too many", type: .weeklyHabit, target: 22)
        }
        await expectError(.invalidArgument, field: "target.levels") {
            _ = try await user.createGoal("Levels", type: .level, target: 1) { $0.target.levels = ["only one"] }
        }
        await expectError(.invalidArgument, field: "target.rating_scale") {
            _ = try await user.createGoal("Rating", type: .rating, target: 3) { $0.target.ratingScale = 7 }
        }
        await expectError(.invalidArgument, field: "start_date") {
            _ = try await user.createGoal("Future", type: .count, target: 3) {
                $0.startDate = .with {
                    $0.year = 2999
                    $0.month = 1
                    $0.day = 1
                }
            }
        }
        let goal = try await user.createGoal("Fixed", type: .count, target: 3)
        await expectError(.invalidArgument, field: "update_mask.paths[0]") {
            _ = try await user.goals.updateGoal(
                .with {
                    $0.goal.id = goal.id
                    $0.updateMask.paths = ["type"]
                }, options: user.options)
        }
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await user.goals.listGoals(.with { $0.pageToken = "forged" }, options: user.options)
        }
        // An icon is one emoji.
        let iconic = try await user.createGoal("Run", type: .count, target: 3) { $0.icon = "🏃" }
        #expect(iconic.icon == "🏃")
    }

    @Test func listsPageAndFilter() async throws {
        let user = try await TestUser()
        var created: [Goal] = []
        for index in 1...5 {
            created.append(try await user.createGoal("Goal \(index)", type: .count, target: 5,
                horizon: index.isMultiple(of: 2) ? .fourWeeks : .ongoing))
        }
        _ = try await user.goals.pauseGoal(.with { $0.goalID = created[4].id }, options: user.options)
        var seen: [String] = []
        var token = ""
        repeat {
            let page = try await user.goals.listGoals(
                .with {
                    $0.pageSize = 2
                    $0.pageToken = token
                }, options: user.options)
            seen += page.goals.map(\.id)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(seen == created.map(\.id))
        let fourWeeks = try await user.goals.listGoals(.with { $0.horizon = .fourWeeks }, options: user.options)
        #expect(fourWeeks.goals.map(\.id) == [created[1].id, created[3].id])
        #expect(try await user.list([.paused]).map(\.id) == [created[4].id])
    }

    @Test func theChangeFeedCarriesUpsertsAndTombstones() async throws {
        let user = try await TestUser()
        let kept = try await user.createGoal("Kept", type: .count, target: 5)
        let gone = try await user.createGoal("Gone", type: .count, target: 5)
        let first = try await user.goals.listChanges(.init(), options: user.options)
        #expect(first.changes.map(\.goal.id) == [kept.id, gone.id])
        _ = try await user.goals.deleteGoal(.with { $0.goalID = gone.id }, options: user.options)
        let next = try await user.goals.listChanges(.with { $0.cursor = first.nextCursor }, options: user.options)
        #expect(next.changes.count == 1)
        #expect(next.changes.first?.goal.id == gone.id)
        #expect(next.changes.first?.deleted == true)
        await expectError(.notFound) { _ = try await user.goal(gone) }
        // Deleting again succeeds.
        _ = try await user.goals.deleteGoal(.with { $0.goalID = gone.id }, options: user.options)
    }

    @Test func accountDeletionRemovesEverything() async throws {
        let user = try await TestUser()
        let goal = try await user.createGoal("Mine", type: .count, target: 5)
        let exported = try await user.fixture.goalsInternal.exportUser(.with { $0.userID = user.userID })
        #expect(exported.goals.map(\.id) == [goal.id])
        var deleted = Habitflow_Events_V1_UserDeleted()
        deleted.userID = user.userID
        try await user.fixture.deliverAccountEvent(deleted, userID: user.userID)
        await expectError(.failedPrecondition) { _ = try await user.goal(goal) }
        let purged = try await user.fixture.goalsInternal.purgeUser(.with { $0.userID = user.userID })
        #expect(!purged.existed)
    }

    @Test func theInternalAPIIsNotForClients() async throws {
        let fixture = try await GoalsFixture.shared.value
        let throughGateway = Habitflow_Goals_V1_GoalsInternal.Client(transport: fixture.goalsChannel)
        await expectError(.permissionDenied) {
            _ = try await throughGateway.listActiveGoals(.with { $0.userID = UUID().uuidString.lowercased() })
        }
    }
}
