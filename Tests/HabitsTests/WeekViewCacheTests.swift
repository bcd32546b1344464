import Foundation
import HabitFlowEvents
import HabitFlowHabits
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import SwiftProtobuf
import Testing
import HabitFlowTestSupport

/// The week view cache (validated by the user's change sequence) and the check-in's remembered zone, seen from a
/// second replica on the same database: what one replica writes, the other must show on the next call.
@Suite("Week view cache across replicas")
struct WeekViewCacheTests {
    /// A replica with its own cache and a client of it for `user`; stopped when `body` returns.
    static func withReplica(
        _ user: TestUser, cache: WeekViewCache = WeekViewCache(),
        _ body: (Habitflow_Habits_V1_HabitsService.Client) async throws -> Void
    ) async throws {
        let replica = try await user.fixture.startReplica(weekViews: cache)
        let channel = try HabitsFixture.channel(to: replica, signedAs: "gateway")
        do {
            try await body(Habitflow_Habits_V1_HabitsService.Client(transport: channel))
        } catch {
            await channel.close()
            await replica.shutdown()
            throw error
        }
        await channel.close()
        await replica.shutdown()
    }

    @Test("every kind of write on one replica changes the next week view on another")
    func writesOnAnotherReplica() async throws {
        let user = try await TestUser()
        let cache = WeekViewCache()
        try await Self.withReplica(user, cache: cache) { replica in
            func view() async throws -> WeekView { try await replica.getWeek(.init(), options: user.options) }
            let categories = try await user.categories()
            let health = try #require(categories.first { $0.name == "Health" })
            let habit = try await user.createHabit("Run", target: 3, category: health.id)
            var last = try await view()
            #expect(cache.contains(user: user.id))
            #expect(TestUser.progress(of: habit, in: last) == "0/3")

            /// Runs a write through the shared host (the other replica) and returns the replica's next view, which
            /// must differ from the one before.
            func afterWrite(_ write: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation)
                async throws -> WeekView
            {
                try await write()
                let next = try await view()
                #expect(next != last, "the view did not change", sourceLocation: sourceLocation)
                last = next
                return next
            }

            var next = try await afterWrite { try await user.markDone(habit) }
            #expect(TestUser.progress(of: habit, in: next) == "1/3")
            next = try await afterWrite { try await user.markNotDone(habit) }
            #expect(TestUser.progress(of: habit, in: next) == "0/3")
            let second = try await user.createHabit("Read")
            next = try await afterWrite {}
            #expect(next.habits.map(\.habit.name) == ["Run", "Read"])
            next = try await afterWrite { _ = try await user.updateTarget(habit, to: 5) }
            #expect(TestUser.progress(of: habit, in: next) == "0/5")
            next = try await afterWrite { _ = try await user.rename(second, to: "Read more") }
            #expect(next.habits.map(\.habit.name) == ["Run", "Read more"])
            next = try await afterWrite { _ = try await user.delete(second) }
            #expect(next.habits.map(\.habit.name) == ["Run"])
            next = try await afterWrite {
                _ = try await user.api.renameCategory(
                    .with {
                        $0.categoryID = health.id
                        $0.name = "Fitness"
                    }, options: user.options)
            }
            #expect(next.categoryScores.map(\.categoryName).contains("Fitness"))
            next = try await afterWrite {
                _ = try await user.api.reorderCategories(
                    .with { $0.categoryIds = [health.id] }, options: user.options)
            }
            #expect(next.categoryScores.first?.categoryName == "Fitness")
            next = try await afterWrite {
                _ = try await user.api.deleteCategory(.with { $0.categoryID = health.id }, options: user.options)
            }
            #expect(!next.categoryScores.map(\.categoryName).contains("Fitness"))
            #expect(next.habits.first?.habit.categoryID == "")
            next = try await afterWrite { try await user.setTimeZone("Asia/Tokyo") }
            #expect(next.timeZone == "Asia/Tokyo")

            var deleted = Habitflow_Events_V1_UserDeleted()
            deleted.userID = user.id.uuidString.lowercased()
            try await user.fixture.deliver(deleted, aggregateID: deleted.userID)
            await expectError(.failedPrecondition) { _ = try await view() }
        }
    }

    @Test("a cached view is served while the user's change sequence stands, and read again once it moves")
    func servedUntilTheSequenceMoves() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Stretch")
        let habitID = try #require(UUID(uuidString: habit.id))
        try await Self.withReplica(user) { replica in
            func name() async throws -> String? {
                try await replica.getWeek(.init(), options: user.options).habits.first?.habit.name
            }
            #expect(try await name() == "Stretch")
            // A change no write of the service would make: behind the sequence's back, so the cache cannot see it.
            try await user.fixture.pool.execute("UPDATE habits SET name = 'Renamed' WHERE id = \(habitID)")
            #expect(try await name() == "Stretch")
            // Then the next change-sequence value, as every write takes it: on the user's row and the rows it writes.
            try await user.fixture.pool.transaction { tx in
                let next = try #require(try await tx.queryRow(
                    "UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(user.id) RETURNING change_seq"))
                try await tx.execute(
                    "UPDATE habits SET change_seq = \(try next.decode(0, as: Int64.self)) WHERE id = \(habitID)")
            }
            #expect(try await name() == "Renamed")
        }
    }

    @Test("a weekly score (GetWeeklyScores) of a week whose view was read under the user's version is made from it")
    func weeklyScoreFromTheView() async throws {
        let user = try await TestUser()
        let health = try #require(try await user.categories().first { $0.name == "Health" })
        let walk = try await user.createHabit("Walk", target: 1, category: health.id)
        _ = try await user.createHabit("Read", target: 2)
        try await user.markDone(walk)
        let replica = try await user.fixture.startReplica(weekViews: WeekViewCache())
        let publicChannel = try HabitsFixture.channel(to: replica, signedAs: "gateway")
        let internalChannel = try HabitsFixture.channel(to: replica, signedAs: "social")
        let internalAPI = Habitflow_Habits_V1_HabitsInternal.Client(transport: internalChannel)
        func score(in week: Habitflow_Habits_V1_IsoWeek) async throws -> Habitflow_Habits_V1_UserWeeklyScore {
            try #require(
                try await internalAPI.getWeeklyScores(
                    .with {
                        $0.userIds = [user.id.uuidString]
                        $0.week = week
                    }
                ).scores.first)
        }

        let view = try await Habitflow_Habits_V1_HabitsService.Client(transport: publicChannel)
            .getWeek(.init(), options: user.options)
        // Behind the sequence's back: only a score made from the cached view still counts the check-in.
        try await user.fixture.pool.execute("UPDATE entries SET deleted_at = now() WHERE user_id = \(user.id)")
        let fromView = try await score(in: view.week)
        #expect(fromView.score == view.score)
        #expect(fromView.habitCount == 2)
        #expect(fromView.categoryScores.map(\.categoryName) == view.categoryScores.map(\.categoryName))
        #expect(fromView.categoryScores.map(\.score) == view.categoryScores.map(\.score))
        #expect(fromView.score.display == "50% (1/2 habits)")
        // Once the sequence moves, the score is read again.
        try await user.fixture.pool.execute("UPDATE users SET change_seq = change_seq + 1 WHERE user_id = \(user.id)")
        #expect(try await score(in: view.week).score.display == "0% (0/2 habits)")

        await publicChannel.close()
        await internalChannel.close()
        await replica.shutdown()
    }

    @Test("every write to a habit on one replica shows in the next habit list on another; a check-in keeps it cached")
    func habitListAcrossReplicas() async throws {
        let user = try await TestUser()
        let habit = try await user.createHabit("Run", target: 3)
        let habitID = try #require(UUID(uuidString: habit.id))
        try await Self.withReplica(user) { replica in
            func list(pageSize: Int32 = 0, deleted: Bool = false) async throws -> [String] {
                try await replica.listHabits(
                    .with {
                        $0.pageSize = pageSize
                        $0.showDeleted = deleted
                    }, options: user.options
                ).habits.map { "\($0.name) \($0.weeklyTarget)\($0.deleted ? " deleted" : "")" }
            }
            #expect(try await list() == ["Run 3"])

            // A change behind the service's back (no change-sequence value): the cached list stands through a
            // check-in, which moves the user's version but not the habits'.
            try await user.fixture.pool.execute("UPDATE habits SET name = 'Sprint' WHERE id = \(habitID)")
            try await user.markDone(habit)
            #expect(try await list() == ["Run 3"])
            // Another request (a page size, deleted ones) is read, not served from the other request's answer.
            #expect(try await list(pageSize: 1) == ["Sprint 3"])

            let second = try await user.createHabit("Read")
            #expect(try await list() == ["Sprint 3", "Read 7"])
            _ = try await user.updateTarget(habit, to: 5)
            #expect(try await list() == ["Sprint 5", "Read 7"])
            _ = try await user.rename(second, to: "Read more")
            #expect(try await list() == ["Sprint 5", "Read more 7"])
            _ = try await user.delete(second)
            #expect(try await list() == ["Sprint 5"])
            #expect(try await list(deleted: true) == ["Sprint 5", "Read more 7 deleted"])

            var deleted = Habitflow_Events_V1_UserDeleted()
            deleted.userID = user.id.uuidString.lowercased()
            try await user.fixture.deliver(deleted, aggregateID: deleted.userID)
            await expectError(.failedPrecondition) { _ = try await list() }
        }
    }

    @Test("every entry written on one replica, in the current week or an earlier one, shows in the next score history on another")
    func scoreHistoryAfterEntryWrites() async throws {
        let user = try await TestUser()
        try user.setNow("2026-03-18T12:00:00Z")  // a Wednesday of week 12
        let habit = try await user.createHabit("Run", target: 1)
        try await Self.withReplica(user) { replica in
            /// Weeks 9 to 12 as "met/total" on the replica, which must answer as the shared host does.
            func history(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String] {
                let request = Habitflow_Habits_V1_GetScoreHistoryRequest.with { $0.startWeek = isoWeek(2026, 9) }
                let weeks = try await replica.getScoreHistory(request, options: user.options).weeks
                let shared = try await user.api.getScoreHistory(request, options: user.options).weeks
                #expect(weeks == shared, "the replicas disagree", sourceLocation: sourceLocation)
                return weeks.map { "\($0.score.metHabits)/\($0.score.totalHabits)" }
            }
            #expect(try await history() == ["0/0", "0/0", "0/0", "0/1"])
            try await user.markDone(habit)
            #expect(try await history() == ["0/0", "0/0", "0/0", "1/1"])
            // A check-in two weeks back also moves the habit's first week back.
            try await user.markDone(habit, on: date(2026, 3, 3))
            #expect(try await history() == ["0/0", "1/1", "0/1", "1/1"])
            try await user.markNotDone(habit)
            #expect(try await history() == ["0/0", "1/1", "0/1", "0/1"])
            try await user.markDone(habit, on: date(2026, 3, 11))
            #expect(try await history() == ["0/0", "1/1", "1/1", "0/1"])
            try await user.markNotDone(habit, on: date(2026, 3, 3))
            #expect(try await history() == ["0/0", "0/1", "1/1", "0/1"])
            // An entry before the weeks asked counts in none of them; the habit is live in all of them now.
            try await user.markDone(habit, on: date(2026, 1, 7))
            #expect(try await history() == ["0/1", "0/1", "1/1", "0/1"])
        }
    }

    @Test("every write to a habit, and a zone change, on one replica shows in the next score history on another")
    func scoreHistoryAfterHabitWrites() async throws {
        let user = try await TestUser()
        // 20:00 UTC on Sunday 2026-03-22 (week 12) is already Monday of week 13 on Kiritimati (UTC+14).
        try user.setNow("2026-03-22T20:00:00Z")
        let habit = try await user.createHabit("Run", target: 1)
        let habitID = try #require(UUID(uuidString: habit.id))
        try await Self.withReplica(user) { replica in
            /// The last three weeks of the range asked as "week: met/total" on the replica, which must answer as the
            /// shared host does.
            func history(
                through end: Int32? = nil, sourceLocation: SourceLocation = #_sourceLocation
            ) async throws -> [String] {
                let request = Habitflow_Habits_V1_GetScoreHistoryRequest.with {
                    if let end { $0.endWeek = isoWeek(2026, end) }
                }
                let weeks = try await replica.getScoreHistory(request, options: user.options).weeks
                let shared = try await user.api.getScoreHistory(request, options: user.options).weeks
                #expect(weeks == shared, "the replicas disagree", sourceLocation: sourceLocation)
                return weeks.suffix(3).map { "\($0.week.week): \($0.score.metHabits)/\($0.score.totalHabits)" }
            }
            #expect(try await history() == ["10: 0/0", "11: 0/0", "12: 0/1"])
            try await user.markDone(habit)
            #expect(try await history() == ["10: 0/0", "11: 0/0", "12: 1/1"])

            // A change behind the service's back (no change-sequence value): the replica scores with the habits it
            // kept through a check-in, which moves the user's version but not the habits'.
            try await user.fixture.pool.execute(
                "UPDATE habit_targets SET weekly_target = 2 WHERE habit_id = \(habitID)")
            try await user.markNotDone(habit)
            try await user.markDone(habit)
            let kept = try await replica.getScoreHistory(.init(), options: user.options).weeks
            #expect(kept.last.map { "\($0.score.metHabits)/\($0.score.totalHabits)" } == "1/1")

            let second = try await user.createHabit("Read", target: 1)
            #expect(try await history() == ["10: 0/0", "11: 0/0", "12: 0/2"])
            _ = try await user.updateTarget(habit, to: 1)
            #expect(try await history() == ["10: 0/0", "11: 0/0", "12: 1/2"])
            _ = try await user.delete(second)
            #expect(try await history() == ["10: 0/0", "11: 0/0", "12: 1/1"])

            // The replica's hint is UTC, where week 13 has not begun: the range is checked in the stored zone.
            try await user.setTimeZone("Pacific/Kiritimati")
            #expect(try await history(through: 13) == ["11: 0/0", "12: 1/1", "13: 0/1"])
            try await user.setTimeZone("UTC", changedAt: Date().addingTimeInterval(1))
            #expect(try await history() == ["10: 0/0", "11: 0/0", "12: 1/1"])
            try await user.setTimeZone("Pacific/Kiritimati", changedAt: Date().addingTimeInterval(2))
            #expect(try await history() == ["11: 0/0", "12: 1/1", "13: 0/1"])
            await expectError(.invalidArgument, field: "end_week") { _ = try await history(through: 14) }
        }
    }

    @Test("every entry written on one replica, on any day of the kept week or before it, shows in the next week view on another")
    func weekViewAfterEntryWrites() async throws {
        let user = try await TestUser()
        try user.setNow("2026-03-18T12:00:00Z")  // a Wednesday of week 12
        let run = try await user.createHabit("Run", target: 3)
        try await Self.withReplica(user) { replica in
            /// Each habit's entries per day (Monday first) in the replica's view, which must answer as the shared host.
            func days(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [[Int32]] {
                let view = try await replica.getWeek(.init(), options: user.options)
                let shared = try await user.api.getWeek(.init(), options: user.options)
                #expect(view == shared, "the replicas disagree", sourceLocation: sourceLocation)
                return view.habits.map(\.dayCompletions)
            }
            #expect(try await days() == [[0, 0, 0, 0, 0, 0, 0]])
            _ = try await user.markDone(run)
            #expect(try await days() == [[0, 0, 1, 0, 0, 0, 0]])
            _ = try await user.markDone(run, on: date(2026, 3, 16))
            _ = try await user.markDone(run)
            #expect(try await days() == [[1, 0, 2, 0, 0, 0, 0]])
            _ = try await user.markNotDone(run, on: date(2026, 3, 16))
            #expect(try await days() == [[0, 0, 2, 0, 0, 0, 0]])
            // Before the week: nothing in it changes, though the habit's first week moves back.
            _ = try await user.markDone(run, on: date(2026, 3, 11))
            #expect(try await days() == [[0, 0, 2, 0, 0, 0, 0]])
            let read = try await user.createHabit("Read", target: 1)
            _ = try await user.markDone(read, on: date(2026, 3, 17))
            #expect(try await days() == [[0, 0, 2, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0]])
            _ = try await user.markNotDone(run)
            let kept = try await replica.getWeek(.init(), options: user.options)
            #expect(kept.habits.map(\.dayCompletions) == [[0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0]])
            #expect(TestUser.progress(of: read, in: kept) == "1/1")
            // A replica with nothing kept reads the same view whole.
            try await Self.withReplica(user) { fresh in
                let whole = try await fresh.getWeek(.init(), options: user.options)
                #expect(whole == kept)
            }
        }
    }

    @Test("the cache keeps at most its capacity of users and reads evicted ones again")
    func bounded() async throws {
        let first = try await TestUser()
        let cache = WeekViewCache(capacity: 3)
        try await Self.withReplica(first, cache: cache) { replica in
            var users = [first]
            for _ in 1..<5 { users.append(try await TestUser()) }
            var habits: [Habit] = []
            for user in users {
                let habit = try await user.createHabit("Walk")
                habits.append(habit)
                #expect(TestUser.progress(of: habit, in: try await replica.getWeek(.init(), options: user.options)) == "0/7")
                #expect(cache.count <= 3)
            }
            #expect(cache.count == 3)
            #expect(users.map { cache.contains(user: $0.id) } == [false, false, true, true, true])
            try await first.markDone(habits[0])
            let again = try await replica.getWeek(.init(), options: first.options)
            #expect(TestUser.progress(of: habits[0], in: again) == "1/7")
            #expect(cache.contains(user: first.id))
            #expect(cache.count == 3)
        }
    }

    @Test("a check-in after a zone change on another replica dates the entry in the new zone")
    func checkInAfterZoneChange() async throws {
        let user = try await TestUser()
        // 20:00 UTC on Wednesday 2026-01-14 is already Thursday the 15th on Kiritimati (UTC+14).
        try user.setNow("2026-01-14T20:00:00Z")
        let habit = try await user.createHabit("Meditate")
        try await Self.withReplica(user) { replica in
            func markDone(on date: ProtoDate? = nil) async throws -> Entry {
                try await replica.markHabitDone(
                    .with {
                        $0.habitID = habit.id
                        if let date { $0.date = date }
                    }, options: user.options)
            }
            // The replica now remembers the zone (UTC).
            #expect(try await markDone().date == date(2026, 1, 14))
            let error = await expectError(.invalidArgument, field: "date") { _ = try await markDone(on: date(2026, 1, 15)) }
            #expect(error?.message.contains("2026-01-14 in UTC") == true, "\(String(describing: error))")

            try await user.setTimeZone("Pacific/Kiritimati")
            #expect(try await markDone().date == date(2026, 1, 15))
            try await user.setTimeZone("UTC", changedAt: Date().addingTimeInterval(1))
            // The replica remembers Kiritimati; the stored zone is UTC again, where the 15th is still the future.
            await expectError(.invalidArgument, field: "date") { _ = try await markDone(on: date(2026, 1, 15)) }
            #expect(try await markDone().date == date(2026, 1, 14))
            let week = try await replica.getWeek(.init(), options: user.options)
            #expect(TestUser.progress(of: habit, in: week) == "3/7")
        }
    }

    @Test("a removal after a zone change on another replica removes the day's entries in the new zone")
    func removalAfterZoneChange() async throws {
        let user = try await TestUser()
        // 20:00 UTC on Wednesday 2026-01-14 is already Thursday the 15th on Kiritimati (UTC+14).
        try user.setNow("2026-01-14T20:00:00Z")
        let habit = try await user.createHabit("Meditate")
        try await Self.withReplica(user) { replica in
            func markNotDone(on date: ProtoDate? = nil) async throws -> Int32 {
                try await replica.markHabitNotDone(
                    .with {
                        $0.habitID = habit.id
                        if let date { $0.date = date }
                    }, options: user.options
                ).removedEntries
            }
            // The replica now remembers the zone (UTC).
            #expect(try await replica.markHabitDone(.with { $0.habitID = habit.id }, options: user.options).date
                == date(2026, 1, 14))
            try await user.setTimeZone("Pacific/Kiritimati")
            try await user.markDone(habit)  // the 15th, through the other replica

            // Today is the 15th now: the replica's remembered UTC would have removed the 14th's check-in.
            #expect(try await markNotDone() == 1)
            #expect(try await markNotDone(on: date(2026, 1, 14)) == 1)
            #expect(try await markNotDone(on: date(2026, 1, 14)) == 0)

            try await user.setTimeZone("UTC", changedAt: Date().addingTimeInterval(1))
            // The replica remembers Kiritimati; the stored zone is UTC again, where the 15th is still the future.
            await expectError(.invalidArgument, field: "date") { _ = try await markNotDone(on: date(2026, 1, 15)) }
            #expect(try await markNotDone() == 0)
        }
    }
}
