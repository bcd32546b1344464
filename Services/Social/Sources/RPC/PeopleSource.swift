internal import HabitFlowAuthProtos

// BUILD PLACEHOLDER: the helper that owns friends builds it (lookups by email or username, and names by id with
// one GetUsers call, which the leaderboard uses).
struct PeopleSource: Sendable {
    let client: Habitflow_Auth_V1_AuthInternal.Client
}
