import Foundation
import HabitFlowEvents
import HabitFlowHabits
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowServiceKit
import SwiftProtobuf
import Testing
import HabitFlowTestSupport

/// Auth's account events and the internal API other services call.
@Suite("Account events and internal RPCs")
struct EventsAndInternalTests {
    @Test("UserCreated creates the defaults and the zone once, even when redelivered")
    func userCreated() async throws {
        let user = try await TestUser()
        var created = Habitflow_Events_V1_UserCreated()
        created.userID = user.id.uuidString.lowercased()
        created.username = "someone"
        created.timeZone = "Asia/Tokyo"
        created.createdAt = Google_Protobuf_Timestamp(date: Date())
        let eventID = UUID()
        #expect(try await user.fixture.deliver(created, aggregateID: created.userID, eventID: eventID))
        #expect(try await !user.fixture.deliver(created, aggregateID: created.userID, eventID: eventID))
        let categories = try await user.categories()
        #expect(categories.map(\.name) == ["Career", "Health", "Family", "Finances", "Wisdom"])
        #expect(try await user.week().timeZone == "Asia/Tokyo")
        // A second UserCreated (another event id) for a known user adds no categories.
        #expect(try await user.fixture.deliver(created, aggregateID: created.userID))
        #expect(try await user.categories().count == 5)
    }

    @Test("UserCreated after the user's first call keeps the lazily made defaults and sets the zone")
    func userCreatedAfterFirstCall() async throws {
        let user = try await TestUser()
        let lazily = try await user.categories()
        var created = Habitflow_Events_V1_UserCreated()
        created.userID = user.id.uuidString.lowercased()
        created.timeZone = "Europe/Berlin"
        #expect(try await user.fixture.deliver(created, aggregateID: created.userID))
        #expect(try await user.categories() == lazily)
        #expect(try await user.week().timeZone == "Europe/Berlin")
    }

    @Test("UserDeleted removes everything once; redelivery and PurgeUser change nothing more")
    func userDeleted() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Gone")
        try await user.markDone(habit)
        var deleted = Habitflow_Events_V1_UserDeleted()
        deleted.userID = user.id.uuidString.lowercased()
        let eventID = UUID()
        #expect(try await user.fixture.deliver(deleted, aggregateID: deleted.userID, eventID: eventID))
        #expect(try await !user.fixture.deliver(deleted, aggregateID: deleted.userID, eventID: eventID))
        let pool = user.fixture.pool
        let remaining: [PostgresQuery] = [
            "SELECT count(*) FROM users WHERE user_id = \(user.id)",
            "SELECT count(*) FROM categories WHERE user_id = \(user.id)",
            "SELECT count(*) FROM habits WHERE user_id = \(user.id)",
            "SELECT count(*) FROM habit_targets WHERE user_id = \(user.id)",
            "SELECT count(*) FROM entries WHERE user_id = \(user.id)",
        ]
        for query in remaining {
            #expect(try await pool.queryRow(query)?.decode(0, as: Int64.self) == 0, "\(query)")
        }
        #expect(try await !user.fixture.internalAPI.purgeUser(.with { $0.userID = deleted.userID }).existed)
        // A late UserCreated does not bring the account back.
        var created = Habitflow_Events_V1_UserCreated()
        created.userID = deleted.userID
        #expect(try await user.fixture.deliver(created, aggregateID: created.userID))
        await expectError(.failedPrecondition) { _ = try await user.categories() }
    }

    /// ListHabits and ListCategories read in one statement with the user's row; without that row (a new or a deleted
    /// account) they take the general way.
    @Test("lists create a user the service has not seen, show nothing when there is nothing, refuse a deleted account")
    func listsOfNewEmptyAndDeletedUsers() async throws {
        let newcomer = try await TestUser()
        #expect(try await newcomer.api.listHabits(.init(), options: newcomer.options).habits.isEmpty)
        #expect(try await newcomer.fixture.pool.queryRow("SELECT 1 FROM users WHERE user_id = \(newcomer.id)") != nil)
        #expect(try await newcomer.categories().map(\.name) == HabitRules.defaultCategoryNames)
        // Known now, with deleted habits only: none live, the deleted one on request.
        let gone = try await newcomer.delete(try await newcomer.createHabit("Gone"))
        #expect(try await newcomer.api.listHabits(.init(), options: newcomer.options).habits.isEmpty)
        #expect(
            try await newcomer.api.listHabits(.with { $0.showDeleted = true }, options: newcomer.options).habits.map(\.id)
                == [gone.id])

        let another = try await TestUser()
        #expect(try await another.categories().map(\.name) == HabitRules.defaultCategoryNames)

        _ = try await newcomer.fixture.internalAPI.purgeUser(.with { $0.userID = newcomer.id.uuidString })
        await expectError(.failedPrecondition) { _ = try await newcomer.categories() }
        await expectError(.failedPrecondition) {
            _ = try await newcomer.api.listHabits(.init(), options: newcomer.options)
        }
    }

    @Test("a malformed account event is acknowledged and skipped, not retried forever")
    func malformedEvent() async throws {
        let fixture = try await HabitsFixture.shared.value
        var created = Habitflow_Events_V1_UserCreated()
        created.userID = "not-a-uuid"
        #expect(try await fixture.deliver(created, aggregateID: "x"))
        let subscriber = Habitflow_Events_V1_EventSubscriber.Client(transport: fixture.authChannel)
        #expect(
            try await subscriber.deliver(
                .with {
                    $0.event.id = UUID().uuidString
                    $0.event.type = "habitflow.events.v1.UserCreated"
                    $0.event.payload = Data([0xff, 0xff, 0xff])
                }
            ).applied)
    }

    @Test("AggregateEntries counts and sums per habit and ISO week, deleted habits included")
    func aggregateEntries() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-21T12:00:00Z")
        let run = try await user.createHabit("Run", unit: "km")
        let swim = try await user.createHabit("Swim")
        try await user.markDone(run, on: date(2026, 1, 11), value: 3)  // 2026-W02 (Sunday)
        try await user.markDone(run, on: date(2026, 1, 12), value: 2.5)  // 2026-W03 (Monday)
        try await user.markDone(run, on: date(2026, 1, 18), value: 4)  // 2026-W03
        try await user.markDone(run, on: date(2026, 1, 20), value: 10)  // 2026-W04, outside the range below
        try await user.markDone(swim, on: date(2026, 1, 13))
        _ = try await user.delete(swim)

        let response = try await user.fixture.internalAPI.aggregateEntries(
            .with {
                $0.userID = user.id.uuidString
                $0.habitIds = [run.id, swim.id]
                $0.startDate = date(2026, 1, 5)
                $0.endDate = date(2026, 1, 19)
            })
        let rows = response.aggregates.map { "\($0.habitID == run.id ? "run" : "swim") \($0.week.year)-W\($0.week.week) \($0.entryCount) \($0.valueSum)" }
        #expect(rows == ["run 2026-W2 1 3.0", "run 2026-W3 2 6.5", "swim 2026-W3 1 1.0"])
        #expect(response.aggregates.first?.weekStart == date(2026, 1, 5))

        let stranger = try await TestUser()
        let theirs = try await stranger.createHabit("Theirs")
        await expectError(.notFound) {
            _ = try await user.fixture.internalAPI.aggregateEntries(
                .with {
                    $0.userID = user.id.uuidString
                    $0.habitIds = [run.id, theirs.id]
                    $0.startDate = date(2026, 1, 5)
                    $0.endDate = date(2026, 1, 19)
                })
        }
        await expectError(.invalidArgument, field: "end_date") {
            _ = try await user.fixture.internalAPI.aggregateEntries(
                .with {
                    $0.userID = user.id.uuidString
                    $0.habitIds = [run.id]
                    $0.startDate = date(2000, 1, 1)
                    $0.endDate = date(2026, 1, 19)
                })
        }
        // No habits: nothing to aggregate (the answer still carries the user's version).
        let none = try await user.fixture.internalAPI.aggregateEntries(
            .with {
                $0.userID = user.id.uuidString
                $0.startDate = date(2026, 1, 1)
                $0.endDate = date(2026, 1, 2)
            })
        #expect(none.aggregates.isEmpty && none.version > 0)
    }

    @Test("GetWeeklyScores: several users in one call, each in their own current week, unknown users 0/0")
    func weeklyScores() async throws {
        let alice = try await TestUser()
        let bob = try await TestUser()
        try alice.setNow("2026-01-14T12:00:00Z")
        try bob.setNow("2026-01-14T12:00:00Z")
        let health = try #require(try await alice.categories().first { $0.name == "Health" })
        let walk = try await alice.createHabit("Walk", target: 1, category: health.id)
        let read = try await alice.createHabit("Read", target: 2)
        try await alice.markDone(walk)
        let gym = try await bob.createHabit("Gym", target: 1)
        try await bob.markDone(gym)
        let stranger = UUID()

        let internalAPI = alice.fixture.internalAPI
        let response = try await internalAPI.getWeeklyScores(
            .with {
                $0.userIds = [alice.id.uuidString, bob.id.uuidString, stranger.uuidString]
                $0.week = isoWeek(2026, 3)
            })
        #expect(response.scores.map(\.score.display) == ["50% (1/2 habits)", "100% (1/1 habits)", "0% (0/0 habits)"])
        #expect(response.scores.map(\.habitCount) == [2, 1, 0])
        #expect(response.scores[0].userID == alice.id.uuidString.lowercased())
        #expect(response.scores[0].categoryScores.first { $0.categoryName == "Health" }?.score.display == "100% (1/1 habits)")

        // Scores are kept per user and version: Alice's check-ins show at the next call, Bob's answer is the same.
        try await alice.markDone(read)
        try await alice.markDone(read)
        let again = try await internalAPI.getWeeklyScores(
            .with {
                $0.userIds = [alice.id.uuidString, bob.id.uuidString, stranger.uuidString]
                $0.week = isoWeek(2026, 3)
            })
        #expect(again.scores.map(\.score.display) == ["100% (2/2 habits)", "100% (1/1 habits)", "0% (0/0 habits)"])
        #expect(again.scores.map(\.userID) == response.scores.map(\.userID))

        // Without a week: each user's current week (the caller's clock here: Alice's).
        let current = try await internalAPI.getWeeklyScores(
            .with { $0.userIds = [alice.id.uuidString] }, options: .onBehalf(of: alice.id))
        #expect(current.scores.first?.week == isoWeek(2026, 3))
        #expect(current.scores.first?.score.metHabits == 2)

        await expectError(.invalidArgument, field: "user_ids") {
            _ = try await internalAPI.getWeeklyScores(
                .with { $0.userIds = (0...101).map { _ in UUID().uuidString } })
        }
        await expectError(.invalidArgument, field: "user_ids[1]") {
            _ = try await internalAPI.getWeeklyScores(.with { $0.userIds = [alice.id.uuidString, alice.id.uuidString] })
        }
    }

    @Test("PurgeUser removes a user's data; the gateway cannot call the internal API")
    func purgeAndGateway() async throws {
        let user = try await TestUser()
        _ = try await user.createHabit("Purged")
        let response = try await user.fixture.internalAPI.purgeUser(.with { $0.userID = user.id.uuidString })
        #expect(response.existed)
        await expectError(.failedPrecondition) { _ = try await user.createHabit("Again") }

        let asGateway = Habitflow_Habits_V1_HabitsInternal.Client(transport: user.fixture.channel)
        await expectError(.permissionDenied) {
            _ = try await asGateway.purgeUser(.with { $0.userID = UUID().uuidString })
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await user.fixture.internalAPI.purgeUser(.with { $0.userID = "x" })
        }
    }
}
