internal import HabitFlowHabitsProtos

// BUILD PLACEHOLDER: the helper that owns the leaderboard builds it.
struct ScoreSource: Sendable {
    let client: Habitflow_Habits_V1_HabitsInternal.Client
}
