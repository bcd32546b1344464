internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowCrypto
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC

/// The habits service as the social service uses it: weekly scores for leaderboards and the user's live categories
/// for the sharing settings, one call each. Habits' own errors (UNAVAILABLE, ...) reach the caller as they are.
struct ScoreSource: Sendable {
    let client: Habitflow_Habits_V1_HabitsInternal.Client

    /// What habits' GetWeeklyScores takes in one call: a user and their 100 friends.
    static let maximumUsersPerCall = 101

    /// Every user's score, habit count and category scores in `week` (the same week for all, named explicitly: the
    /// caller's week, not each user's own), in one call. A user habits does not know scores 0/0.
    func weeks(of userIDs: [UUID], in week: IsoWeek, options: CallOptions) async throws -> [UUID: UserWeek] {
        precondition(userIDs.count <= Self.maximumUsersPerCall, "a leaderboard has at most 101 lines")
        guard !userIDs.isEmpty else { return [:] }
        let response = try await client.getWeeklyScores(
            .with {
                $0.userIds = userIDs.map(\.lowercasedString)
                $0.week = .with {
                    $0.year = Int32(week.year)
                    $0.week = Int32(week.week)
                }
            }, options: options)
        var weeks: [UUID: UserWeek] = [:]
        for score in response.scores {
            guard let userID = UUID(canonical: score.userID) else { continue }
            weeks[userID] = UserWeek(
                score: WeekScore(score.score), habitCount: Int(score.habitCount),
                categories: score.categoryScores.compactMap { category in
                    // Uncategorized (no id) cannot be shared.
                    UUID(canonical: category.categoryID).map {
                        CategoryScoreLine(categoryID: $0, name: category.categoryName, score: WeekScore(category.score))
                    }
                })
        }
        return weeks
    }

    /// The user's live categories in habits (one LookupHabits call naming no habit).
    func liveCategories(of userID: UUID, options: CallOptions) async throws -> Set<UUID> {
        let response = try await client.lookupHabits(.with { $0.userID = userID.lowercasedString }, options: options)
        return Set(response.categories.compactMap { UUID(canonical: $0.categoryID) })
    }
}

extension WeekScore {
    init(_ proto: Habitflow_Habits_V1_WeeklyScore) {
        self.init(
            percent: Int(proto.percent), metHabits: Int(proto.metHabits), totalHabits: Int(proto.totalHabits),
            display: proto.display)
    }
}
