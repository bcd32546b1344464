import Foundation
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowSocial
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Testing

/// A Wednesday: every user of a test has the same "now" unless the test is about zones.
private let wednesday = "2026-03-04T12:00:00Z"

/// Fresh users at `instant` named by `names`, all friends of the first.
private func board(_ names: [String], at instant: String = wednesday) async throws -> [TestUser] {
    var users: [TestUser] = []
    for name in names {
        let user = try await TestUser(displayName: name)
        try user.setNow(instant)
        users.append(user)
    }
    for friend in users.dropFirst() { try await users[0].makeFriends(with: friend) }
    return users
}

/// `met` of `habits` habits (target 1 a week) checked in this week.
private func score(_ user: TestUser, met: Int, of habits: Int, category: String? = nil) async throws {
    for index in 0..<habits {
        let habit = try await user.createHabit("Habit \(UUID().uuidString.prefix(8))", target: 1, category: category)
        if index < met { try await user.checkIn(habit) }
    }
}

@Suite("Leaderboard")
struct LeaderboardTests {
    @Test("Ranked by score, ties by habit count, then display name ignoring case; the week is the caller's")
    func order() async throws {
        let suffix = UUID().uuidString.prefix(6)
        let users = try await board(["Mia", "Ava", "ben", "Cy", "Dan"].map { "\($0) \(suffix)" })
        let (mia, ava, ben, cy, dan) = (users[0], users[1], users[2], users[3], users[4])
        try await score(mia, met: 1, of: 2)
        try await score(ava, met: 1, of: 1)
        try await score(ben, met: 1, of: 2)
        try await score(cy, met: 2, of: 4)
        _ = dan  // no habits: 0% (0/0)

        let leaderboard = try await mia.leaderboard()
        #expect(leaderboard.week.year == 2026 && leaderboard.week.week == 10)
        #expect(leaderboard.entries.map(\.person.userID) == [ava, cy, ben, mia, dan].map(\.userID))
        #expect(leaderboard.entries.map(\.rank) == [1, 2, 3, 4, 5])
        #expect(leaderboard.entries.map(\.score.display) == [
            "100% (1/1 habits)", "50% (2/4 habits)", "50% (1/2 habits)", "50% (1/2 habits)", "0% (0/0 habits)",
        ])
        #expect(leaderboard.entries.map(\.me) == [false, false, false, true, false])
        #expect(leaderboard.total == 5)
        #expect(leaderboard.myRank == 4)
        #expect(leaderboard.nextPageToken.isEmpty)
        let first = try #require(leaderboard.entries.first)
        #expect(first.person.username == ava.username)
        #expect(first.person.displayName == ava.displayName)
        #expect(first.categoryScores.isEmpty)

        // Ava's board: Ava and her only friend, Mia.
        let avas = try await ava.leaderboard()
        #expect(avas.entries.map(\.person.userID) == [ava.userID, mia.userID])
        #expect(avas.myRank == 1)
    }

    @Test("Private mode and an unshared score hide a user from friends' boards, never from their own")
    func privacy() async throws {
        let users = try await board(["Me", "Private", "Quiet", "Open"])
        let (me, hidden, quiet, open) = (users[0], users[1], users[2], users[3])
        let health = try await hidden.habitCategory("Health").id
        try await score(hidden, met: 1, of: 1, category: health)
        try await hidden.updateSharing(["private_mode", "shared_category_ids"]) {
            $0.privateMode = true
            $0.sharedCategoryIds = [health]
        }
        try await quiet.updateSharing(["share_weekly_score"]) { $0.shareWeeklyScore = false }

        let mine = try await me.leaderboard()
        #expect(Set(mine.entries.map(\.person.userID)) == [me.userID, open.userID])
        #expect(mine.total == 2)

        // Their own boards show them (and me, who shares); private mode shows no category, even to themselves.
        let theirs = try await hidden.leaderboard()
        #expect(theirs.entries.map(\.person.userID) == [hidden.userID, me.userID])
        #expect(theirs.entries[0].me && theirs.entries[0].categoryScores.isEmpty)
        #expect(theirs.entries[0].score.display == "100% (1/1 habits)")
        let quiets = try await quiet.leaderboard()
        #expect(Set(quiets.entries.map(\.person.userID)) == [quiet.userID, me.userID])

        // Private mode also overrides share_weekly_score; turning it off brings the user back.
        try await me.updateSharing(["private_mode"]) { $0.privateMode = true }
        #expect(try await open.leaderboard().entries.map(\.person.userID) == [open.userID])
        try await me.updateSharing(["private_mode"]) { $0.privateMode = false }
        #expect(try await open.leaderboard().total == 2)
    }

    @Test("Everyone is scored on the caller's current week, whatever their own zone says")
    func callersWeek() async throws {
        // Monday 08:00 in Auckland (2026-W03) is still Sunday 11:00 of 2026-W02 in Los Angeles.
        let instant = "2026-01-11T19:00:00Z"
        let caller = try await TestUser(displayName: "Kiwi", timeZone: "Pacific/Auckland")
        let friend = try await TestUser(displayName: "Angeleno", timeZone: "America/Los_Angeles")
        try caller.setNow(instant)
        try friend.setNow(instant)
        try await caller.makeFriends(with: friend)
        // The friend's check-in is on their Sunday, in W02.
        try await score(friend, met: 1, of: 1)

        let callers = try await caller.leaderboard()
        #expect(callers.week.year == 2026 && callers.week.week == 3)
        let line = try #require(callers.entries.first { $0.person.userID == friend.userID })
        #expect(line.score.display == "0% (0/1 habits)")

        // On the friend's own board, their week is W02, where the check-in counts.
        let friends = try await friend.leaderboard()
        #expect(friends.week.week == 2)
        #expect(friends.entries.first { $0.me }?.score.display == "100% (1/1 habits)")
    }

    @Test("A board whose members or week changed since the last scores everyone on it, on the caller's week now")
    func membersOrWeekChanged() async throws {
        // Habits is asked for the last board's members while the members are read: a stale hint must not show.
        let users = try await board(["Me", "Old"])
        let (me, old) = (users[0], users[1])
        try await score(old, met: 1, of: 1)
        #expect(try await me.leaderboard().entries.map(\.score.display) == ["100% (1/1 habits)", "0% (0/0 habits)"])

        let new = try await TestUser(displayName: "New")
        try new.setNow(wednesday)
        try await me.makeFriends(with: new)
        try await score(new, met: 1, of: 2)
        _ = try await me.social.removeFriend(.with { $0.userID = old.userID }, options: me.options)
        let changed = try await me.leaderboard()
        #expect(changed.entries.map(\.person.userID) == [new.userID, me.userID])
        #expect(changed.entries.map(\.score.display) == ["50% (1/2 habits)", "0% (0/0 habits)"])

        // A week later the same members are scored on the new week, where nothing is checked in yet.
        try me.setNow("2026-03-11T12:00:00Z")
        let nextWeek = try await me.leaderboard()
        #expect(nextWeek.week.week == 11)
        #expect(nextWeek.entries.map(\.person.userID) == [new.userID, me.userID])
        #expect(nextWeek.entries.map(\.score.display) == ["0% (0/2 habits)", "0% (0/0 habits)"])
    }

    @Test("Category scores appear only for the categories a user shares, in the order they chose")
    func sharedCategories() async throws {
        let users = try await board(["Caller", "Friend"])
        let (me, friend) = (users[0], users[1])
        let health = try await friend.habitCategory("Health").id
        let career = try await friend.habitCategory("Career").id
        try await score(friend, met: 1, of: 1, category: health)
        try await score(friend, met: 0, of: 2, category: career)
        let wisdom = try await friend.habitCategory("Wisdom").id

        #expect(try await me.leaderboard().entries.allSatisfy { $0.categoryScores.isEmpty })

        try await friend.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [career, health, wisdom] }
        let line = try #require(try await me.leaderboard().entries.first { $0.person.userID == friend.userID })
        #expect(line.categoryScores.map(\.categoryID) == [career, health, wisdom])
        #expect(line.categoryScores.map(\.categoryName) == ["Career", "Health", "Wisdom"])
        #expect(line.categoryScores.map(\.score.display) == ["0% (0/2 habits)", "100% (1/1 habits)", "0% (0/0 habits)"])
        #expect(line.score.display == "33% (1/3 habits)")

        // A shared category the friend deleted in habits drops out before its event arrives.
        _ = try await friend.habits.deleteCategory(.with { $0.categoryID = wisdom }, options: friend.options)
        let after = try #require(try await me.leaderboard().entries.first { $0.person.userID == friend.userID })
        #expect(after.categoryScores.map(\.categoryID) == [career, health])

        // The caller's own line shows what friends see of them.
        let mine = try await me.habitCategory("Family").id
        try await me.updateSharing(["shared_category_ids"]) { $0.sharedCategoryIds = [mine] }
        let own = try #require(try await me.leaderboard().entries.first { $0.me })
        #expect(own.categoryScores.map(\.categoryName) == ["Family"])
    }

    @Test("A user social has not seen gets a board of their own line, in their week, and is known afterwards")
    func boardOfANewUser() async throws {
        let fixture = try await SocialFixture.shared.value
        let pool = fixture.social.runtime.pool
        let newcomer = UUID()
        let known: PostgresQuery = "SELECT count(*) FROM users WHERE user_id = \(newcomer)"
        #expect(try await pool.queryRow(known)?.decode(0, as: Int64.self) == 0)
        let top = try await fixture.socialInternal.getLeaderboardTop(.with { $0.userID = newcomer.uuidString })
        #expect(top.total == 1 && top.me.me && top.me.rank == 1)
        #expect(try await pool.queryRow(known)?.decode(0, as: Int64.self) == 1)
        let board = try await SocialClient(transport: fixture.socialChannel)
            .getLeaderboard(.init(), options: .onBehalf(of: newcomer))
        #expect(board.total == 1 && board.week == top.week)
    }

    @Test("GetLeaderboardTop answers the top 5 by default, the user's own line, and refuses a bad top")
    func dashboardTop() async throws {
        let names = ["Last"] + (1...6).map { "Friend \($0)" }
        let users = try await board(names)
        for friend in users.dropFirst() { try await score(friend, met: 1, of: 1) }
        let me = users[0]
        let internalAPI = me.fixture.socialInternal

        let top = try await internalAPI.getLeaderboardTop(.with { $0.userID = me.userID }, options: me.options)
        #expect(top.entries.count == 5)
        #expect(top.entries.map(\.rank) == [1, 2, 3, 4, 5])
        #expect(top.total == 7)
        #expect(top.me.rank == 7 && top.me.me && top.me.person.userID == me.userID)
        #expect(top.week.week == 10)

        let three = try await internalAPI.getLeaderboardTop(
            .with {
                $0.userID = me.userID
                $0.top = 20
            }, options: me.options)
        #expect(three.entries.count == 7)
        #expect(three.entries.last?.me == true)

        await expectError(.invalidArgument, field: "top") {
            _ = try await internalAPI.getLeaderboardTop(
                .with {
                    $0.userID = me.userID
                    $0.top = 21
                })
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await internalAPI.getLeaderboardTop(.with { $0.userID = "me" })
        }
        // The gateway may not call it.
        await expectError(.permissionDenied) {
            _ = try await SocialInternalClient(transport: me.fixture.socialChannel).getLeaderboardTop(
                .with { $0.userID = me.userID }, options: me.options)
        }
    }

    @Test("Pages through the board; rank, total, my_rank and my line are over the whole board")
    func pagination() async throws {
        let users = try await board(["Zed", "A1", "A2", "A3", "A4"])
        for (index, friend) in users.dropFirst().enumerated() { try await score(friend, met: index + 1, of: 4) }
        let me = users[0]
        var seen: [Habitflow_Social_V1_LeaderboardEntry] = []
        var token = ""
        var pages = 0
        repeat {
            let page = try await me.leaderboard(pageSize: 2, pageToken: token)
            #expect(page.total == 5)
            #expect(page.myRank == 5)
            // The caller's own line comes on every page, also the ones it is not on.
            #expect(page.me.person.userID == me.userID && page.me.rank == 5 && page.me.me)
            seen += page.entries
            token = page.nextPageToken
            pages += 1
        } while !token.isEmpty && pages < 10
        #expect(pages == 3)
        #expect(seen.map(\.rank) == [1, 2, 3, 4, 5])
        #expect(seen.map(\.person.userID) == [users[4], users[3], users[2], users[1], users[0]].map(\.userID))

        await expectError(.invalidArgument, field: "page_token") { _ = try await me.leaderboard(pageToken: "bogus") }
        await expectError(.invalidArgument, field: "page_size") { _ = try await me.leaderboard(pageSize: -1) }
    }

    @Test("A user with 100 friends gets one board of 101 lines (one call to habits for all of them)")
    func hundredFriends() async throws {
        let me = try await TestUser(displayName: "Centre")
        try me.setNow(wednesday)
        let friends = try await withThrowingTaskGroup(of: TestUser.self) { group in
            var friends: [TestUser] = []
            for index in 0..<100 {
                if index >= 8 { friends.append(try await group.next()!) }
                group.addTask { try await TestUser(displayName: "Friend \(index)") }
            }
            for try await friend in group { friends.append(friend) }
            return friends
        }
        for friend in friends { try await me.makeFriends(with: friend) }
        let habit = try await me.createHabit("Only", target: 1)
        try await me.checkIn(habit)

        let whole = try await me.leaderboard(pageSize: 101)
        #expect(whole.entries.count == 101)
        #expect(whole.total == 101)
        #expect(whole.nextPageToken.isEmpty)
        #expect(whole.myRank == 1 && whole.entries[0].me)

        let capped = try await me.leaderboard(pageSize: 500)
        #expect(capped.entries.count == 101)
        let first = try await me.leaderboard()
        #expect(first.entries.count == 50)
        #expect(!first.nextPageToken.isEmpty)
    }
}

@Suite("Leaderboard rules")
struct LeaderboardRulesTests {
    private func candidate(
        _ name: String, percent: Int, habits: Int, id: UUID = UUID(), caller: Bool = false
    ) -> LeaderboardCandidate {
        LeaderboardCandidate(
            userID: id, username: name.lowercased(), displayName: name,
            week: UserWeek(
                score: WeekScore(percent: percent, metHabits: 0, totalHabits: habits, display: ""),
                habitCount: habits, categories: []),
            categoryScores: [], isCaller: caller)
    }

    @Test("Percent first, then more habits, then the name ignoring case, then the user id; ranks 1...N")
    func ranking() throws {
        let low = UUID(uuidString: "00000000-0000-4000-8000-000000000001")!
        let high = UUID(uuidString: "ffffffff-0000-4000-8000-000000000001")!
        let lines = Leaderboard.ranked([
            candidate("zoe", percent: 50, habits: 2),
            candidate("Same", percent: 50, habits: 2, id: high),
            candidate("Amy", percent: 50, habits: 4),
            candidate("bob", percent: 50, habits: 2),
            candidate("Top", percent: 100, habits: 1),
            candidate("same", percent: 50, habits: 2, id: low),
            candidate("Zero", percent: 0, habits: 0, caller: true),
        ])
        #expect(lines.map(\.candidate.displayName) == ["Top", "Amy", "bob", "same", "Same", "zoe", "Zero"])
        #expect(lines.map(\.rank) == Array(1...7))
    }

    @Test("The caller is always on the board; friends only when they share and are not private")
    func members() {
        let caller = BoardMember(
            userID: UUID(),
            settings: SharingSettings(
                shareWeeklyScore: false, privateMode: true, sharedCategoryIDs: [], updatedAt: nil))
        let sharing = BoardMember(userID: UUID(), settings: .defaults)
        var quiet = BoardMember(userID: UUID(), settings: .defaults)
        quiet.settings.shareWeeklyScore = false
        var hidden = BoardMember(userID: UUID(), settings: .defaults)
        hidden.settings.privateMode = true
        let members = Leaderboard.members(caller: caller, friends: [quiet, sharing, hidden])
        #expect(members.map(\.userID) == [caller.userID, sharing.userID])
    }

    @Test("Shared category scores follow the chosen order, drop what the user lacks, and vanish in private mode")
    func sharedCategories() {
        let (a, b, gone) = (UUID(), UUID(), UUID())
        let week = UserWeek(
            score: .empty, habitCount: 0,
            categories: [
                CategoryScoreLine(categoryID: a, name: "A", score: .empty),
                CategoryScoreLine(categoryID: b, name: "B", score: .empty),
            ])
        var settings = SharingSettings.defaults
        settings.sharedCategoryIDs = [b, gone, a]
        #expect(Leaderboard.sharedCategoryScores(settings, of: week).map(\.name) == ["B", "A"])
        settings.privateMode = true
        #expect(Leaderboard.sharedCategoryScores(settings, of: week).isEmpty)
    }
}
