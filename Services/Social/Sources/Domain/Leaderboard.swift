public import Foundation
internal import HabitFlowCrypto

/// A weekly score as the habits service computes it (seed 004 §3.5): habits that met their target ÷ habits live that
/// week, shown "X% (Y/Z habits)". The social service only passes it on; it never computes a score itself.
public struct WeekScore: Sendable, Hashable {
    /// 0..100
    public var percent: Int
    public var metHabits: Int
    public var totalHabits: Int
    public var display: String

    public init(percent: Int, metHabits: Int, totalHabits: Int, display: String) {
        self.percent = percent
        self.metHabits = metHabits
        self.totalHabits = totalHabits
        self.display = display
    }

    /// A user without habits that week.
    public static let empty = WeekScore(percent: 0, metHabits: 0, totalHabits: 0, display: "0% (0/0 habits)")
}

/// One category's weekly score (habits' category weekly score, never a goals rating).
public struct CategoryScoreLine: Sendable, Hashable {
    public var categoryID: UUID
    public var name: String
    public var score: WeekScore

    public init(categoryID: UUID, name: String, score: WeekScore) {
        self.categoryID = categoryID
        self.name = name
        self.score = score
    }
}

/// A user's week as habits answers it for a leaderboard.
public struct UserWeek: Sendable, Hashable {
    public var score: WeekScore
    /// Habits live that week: the second key of the ranking.
    public var habitCount: Int
    /// Every live category of the user's, in their category order.
    public var categories: [CategoryScoreLine]

    public init(score: WeekScore, habitCount: Int, categories: [CategoryScoreLine]) {
        self.score = score
        self.habitCount = habitCount
        self.categories = categories
    }

    /// A user habits knows nothing of.
    public static let empty = UserWeek(score: .empty, habitCount: 0, categories: [])
}

/// Someone who may be on a leaderboard, with what they share.
public struct BoardMember: Sendable, Hashable {
    public var userID: UUID
    public var settings: SharingSettings

    public init(userID: UUID, settings: SharingSettings) {
        self.userID = userID
        self.settings = settings
    }
}

/// One line before ranking: a person, their week and the category scores their line shows.
public struct LeaderboardCandidate: Sendable, Hashable {
    public var userID: UUID
    public var username: String
    public var displayName: String
    public var week: UserWeek
    /// Only the categories the user shares, in the order they chose.
    public var categoryScores: [CategoryScoreLine]
    public var isCaller: Bool

    public init(
        userID: UUID, username: String, displayName: String, week: UserWeek, categoryScores: [CategoryScoreLine],
        isCaller: Bool
    ) {
        self.userID = userID
        self.username = username
        self.displayName = displayName
        self.week = week
        self.categoryScores = categoryScores
        self.isCaller = isCaller
    }

    /// The name the ranking compares: the display name, or the username while the display name is unknown.
    var shownName: String { displayName.isEmpty ? username : displayName }
}

/// A ranked line: ranks run 1...N without ties.
public struct LeaderboardLine: Sendable, Hashable {
    public var rank: Int
    public var candidate: LeaderboardCandidate

    public init(rank: Int, candidate: LeaderboardCandidate) {
        self.rank = rank
        self.candidate = candidate
    }
}

/// The weekly leaderboard's rules (seed 004 §3.10; DESIGN.md sections 3 "Social" and 3a "Friends and privacy"):
/// who is on a board, what each line shows, and the order.
public enum Leaderboard {
    /// The caller (always, whatever they share: a user sees their own line) and the friends who share their weekly
    /// score and are not in private mode. The caller comes first, friends keep their order.
    public static func members(caller: BoardMember, friends: [BoardMember]) -> [BoardMember] {
        [caller] + friends.filter { $0.userID != caller.userID && $0.settings.sharesWeeklyScore }
    }

    /// The category scores a line shows: the categories the user shares (none in private mode), in the order they
    /// chose, each with its score this week. A shared category the user no longer has (deleted in habits, the event
    /// not yet here) drops out, as does Uncategorized, which nobody can choose.
    public static func sharedCategoryScores(_ settings: SharingSettings, of week: UserWeek) -> [CategoryScoreLine] {
        let byID = Dictionary(week.categories.map { ($0.categoryID, $0) }, uniquingKeysWith: { first, _ in first })
        return settings.visibleCategoryIDs.compactMap { byID[$0] }
    }

    /// Whether `lhs` ranks above `rhs`: the higher percent first, then more habits that week, then the display name
    /// ignoring case, then the user id, so the order is total and every rank is distinct.
    public static func ranksAbove(_ lhs: LeaderboardCandidate, _ rhs: LeaderboardCandidate) -> Bool {
        RankKey(lhs).ranksAbove(RankKey(rhs))
    }

    /// What the order compares, worked out once per line rather than once per comparison (lowercasing names and
    /// formatting ids is most of a sort's cost).
    private struct RankKey {
        var percent: Int
        var habitCount: Int
        var name: String
        var id: String

        init(_ candidate: LeaderboardCandidate) {
            percent = candidate.week.score.percent
            habitCount = candidate.week.habitCount
            name = candidate.shownName.lowercased()
            id = candidate.userID.lowercasedString
        }

        func ranksAbove(_ other: RankKey) -> Bool {
            if percent != other.percent { return percent > other.percent }
            if habitCount != other.habitCount { return habitCount > other.habitCount }
            if name != other.name { return name < other.name }
            return id < other.id
        }
    }

    /// The candidates in rank order, ranked 1...N.
    public static func ranked(_ candidates: [LeaderboardCandidate]) -> [LeaderboardLine] {
        candidates.map { (key: RankKey($0), candidate: $0) }
            .sorted { $0.key.ranksAbove($1.key) }
            .enumerated().map { LeaderboardLine(rank: $0.offset + 1, candidate: $0.element.candidate) }
    }
}
