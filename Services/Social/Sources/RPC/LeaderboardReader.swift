internal import HabitFlowCalendar

// BUILD PLACEHOLDER: the helper that owns the leaderboard builds it (and ScoreSource).
struct LeaderboardReader: Sendable {
    let store: SocialStore
    let people: PeopleSource
    let scores: ScoreSource
    let clock: UserClock
}
