internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowCrypto
internal import HabitFlowRPC
internal import HabitFlowSocialProtos

/// A user's whole weekly leaderboard, ranked: what GetLeaderboard pages through and GetLeaderboardTop cuts.
struct RankedBoard: Sendable {
    /// The caller's current ISO week, every line's week.
    var week: IsoWeek
    var lines: [LeaderboardLine]

    /// The caller's own line (always on the board).
    var mine: LeaderboardLine? { lines.first { $0.candidate.isCaller } }
}

/// Builds leaderboards: the members with their names from the store (the names auth's account events gave them, as
/// the friends list shows them), then the scores from habits in one call, whatever the number of friends (at most 101
/// lines, which habits' GetWeeklyScores takes in one). Auth's GetUsers (500 ids a call) is asked, at the same time,
/// only about members no event has named yet; one it does not know is left out (a deleted account).
struct LeaderboardReader: Sendable {
    let store: SocialStore
    let people: PeopleSource
    let scores: ScoreSource
    let clock: UserClock

    /// The board of `userID`: the week is the user's current ISO week in their stored zone, for everyone on the board
    /// (a friend whose own week differs is scored on the caller's). A user the service has not seen yet (a
    /// dashboard before any social call) is created on the spot; a deleted account is refused.
    func board(of userID: UUID, options: CallOptions) async throws -> RankedBoard {
        var known = try await store.leaderboardCandidatesOfKnownUser(userID)
        if known == nil {
            _ = try await store.userVersion(userID, now: clock.now)
            known = try await store.leaderboardCandidatesOfKnownUser(userID)
        }
        guard let candidates = known else { throw SocialError.accountDeleted(userID) }
        let week = IsoWeek(containing: clock.today(in: candidates.zone))
        let members = Leaderboard.members(caller: candidates.caller, friends: candidates.friends)
        let ids = members.map(\.userID)
        // Names as the friends list shows them; auth is asked only about members no account event has named yet.
        let unnamedIDs = ids.filter { candidates.names[$0] == nil }
        async let weeks = scores.weeks(of: ids, in: week, options: options)
        async let looked = people.people(unnamedIDs, options: options)
        let (userWeeks, lookedUp) = try await (weeks, looked)
        let userNames = candidates.names.merging(lookedUp) { stored, _ in stored }
        let lines: [LeaderboardCandidate] = members.compactMap { member in
            let isCaller = member.userID == userID
            // A friend neither an event nor auth names is a deleted account whose UserDeleted has not arrived yet.
            let unnamed = PersonRecord(id: userID, username: "", displayName: "")
            guard let name = userNames[member.userID] ?? (isCaller ? unnamed : nil) else { return nil }
            let userWeek = userWeeks[member.userID] ?? .empty
            return LeaderboardCandidate(
                userID: member.userID, username: name.username, displayName: name.displayName, week: userWeek,
                categoryScores: Leaderboard.sharedCategoryScores(member.settings, of: userWeek), isCaller: isCaller)
        }
        return RankedBoard(week: week, lines: Leaderboard.ranked(lines))
    }
}

// MARK: - Proto mapping

extension LeaderboardLine {
    var proto: Habitflow_Social_V1_LeaderboardEntry {
        .with {
            $0.rank = Int32(rank)
            $0.person = .with {
                $0.userID = candidate.userID.lowercasedString
                $0.username = candidate.username
                $0.displayName = candidate.displayName
            }
            $0.score = candidate.week.score.leaderboardProto
            $0.categoryScores = candidate.categoryScores.map { category in
                .with {
                    $0.categoryID = category.categoryID.lowercasedString
                    $0.categoryName = category.name
                    $0.score = category.score.leaderboardProto
                }
            }
            $0.me = candidate.isCaller
        }
    }
}

extension WeekScore {
    var leaderboardProto: Habitflow_Social_V1_Score {
        .with {
            $0.percent = Int32(percent)
            $0.metHabits = Int32(metHabits)
            $0.totalHabits = Int32(totalHabits)
            $0.display = display
        }
    }
}

extension IsoWeek {
    var leaderboardProto: Habitflow_Social_V1_IsoWeek {
        .with {
            $0.year = Int32(year)
            $0.week = Int32(week)
        }
    }
}
