internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowCrypto
internal import HabitFlowRPC

/// What friends see of a user: never the email.
struct PersonName: Sendable, Hashable {
    var username: String
    var displayName: String
}

extension PeopleSource {
    /// Names per GetUsers call here: a leaderboard's lines (auth takes up to 500).
    static let maximumNamesPerCall = 101

    /// The current names of `userIDs` (at most 101), in one `AuthInternal.GetUsers` call. Accounts auth does not
    /// know (deleted ones) are left out. Only the username and display name are kept, so nothing else of an account
    /// can leak into an answer.
    func names(of userIDs: [UUID], options: CallOptions) async throws -> [UUID: PersonName] {
        precondition(userIDs.count <= Self.maximumNamesPerCall, "a leaderboard has at most 101 lines")
        guard !userIDs.isEmpty else { return [:] }
        let response = try await client.getUsers(
            .with { $0.userIds = userIDs.map(\.lowercasedString) }, options: options)
        var names: [UUID: PersonName] = [:]
        for user in response.users {
            guard let id = UUID(canonical: user.id) else { continue }
            names[id] = PersonName(username: user.username, displayName: user.displayName)
        }
        return names
    }
}
