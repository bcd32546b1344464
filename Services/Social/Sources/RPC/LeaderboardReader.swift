internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowCrypto
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
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
///
/// Most boards have the same members in the same week as the user's last one, so habits is asked for the last board's
/// members while the store reads the members (``BoardMemberHint``): the board waits for the slower of the two, not
/// for both in turn. Members the hint missed (a new friend, a new week) are asked for after; scores of members no
/// longer on the board are not used.
struct LeaderboardReader: Sendable {
    let store: SocialStore
    let people: PeopleSource
    let scores: ScoreSource
    let clock: UserClock
    /// At most 4,096 users (up to 16 MB if every one of them had 100 friends).
    let memberHints = UserHints<BoardMemberHint>(capacity: 4_096)

    /// The board of `userID`: the week is the user's current ISO week in their stored zone, for everyone on the board
    /// (a friend whose own week differs is scored on the caller's). A user the service has not seen yet (a
    /// dashboard before any social call) is created on the spot; a deleted account is refused.
    func board(of userID: UUID, options: CallOptions) async throws -> RankedBoard {
        let hint = memberHints.hint(for: userID)
        async let hintedWeeks = Self.weeks(of: hint, from: scores, options: options)
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
        async let looked = people.people(unnamedIDs, options: options)
        let hinted: Set<UUID> = if let hint, hint.week == week { hint.members } else { [] }
        async let unhintedWeeks = scores.weeks(of: ids.filter { !hinted.contains($0) }, in: week, options: options)
        var userWeeks = try await unhintedWeeks
        // A hint of another week serves nothing: its call is cancelled when the board returns.
        if !hinted.isEmpty { userWeeks.merge(try await hintedWeeks) { unhinted, _ in unhinted } }
        let lookedUp = try await looked
        memberHints.remember(BoardMemberHint(week: week, members: Set(ids)), for: userID)
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

    /// The hinted members' weeks (none without a hint).
    private static func weeks(
        of hint: BoardMemberHint?, from scores: ScoreSource, options: CallOptions
    ) async throws -> [UUID: UserWeek] {
        guard let hint else { return [:] }
        return try await scores.weeks(of: Array(hint.members), in: hint.week, options: options)
    }
}

/// The week and members of a user's last board: whom to ask habits about before the store has said who is on the
/// board now.
struct BoardMemberHint: Sendable {
    var week: IsoWeek
    var members: Set<UUID>
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
