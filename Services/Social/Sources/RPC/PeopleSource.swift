internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowCrypto
internal import HabitFlowRPC

/// Auth as social uses it: who has an email or username (for friend requests and blocks), and names by id. Only
/// usernames and display names leave this type: never an email. Auth's own errors (UNAVAILABLE, ...) reach the
/// caller as they are.
struct PeopleSource: Sendable {
    let client: Habitflow_Auth_V1_AuthInternal.Client

    /// Who has this email (ignoring case); `nil` when no account has it.
    func person(email: String, options: CallOptions) async throws -> PersonRecord? {
        let response = try await client.lookupUsers(.with { $0.emails = [email] }, options: options)
        return response.users.first { $0.email.lowercased() == email.lowercased() }.flatMap(Self.person)
    }

    /// Who has this username (ignoring case); `nil` when no account has it.
    func person(username: String, options: CallOptions) async throws -> PersonRecord? {
        let response = try await client.lookupUsers(.with { $0.usernames = [username] }, options: options)
        return response.users.first { $0.username.lowercased() == username.lowercased() }.flatMap(Self.person)
    }

    /// The accounts among `ids` that exist, by id (one GetUsers call; at most 500 ids).
    func people(_ ids: [UUID], options: CallOptions) async throws -> [UUID: PersonRecord] {
        guard !ids.isEmpty else { return [:] }
        let response = try await client.getUsers(.with { $0.userIds = ids.map(\.lowercasedString) }, options: options)
        return Dictionary(response.users.compactMap(Self.person).map { ($0.id, $0) }) { first, _ in first }
    }

    private static func person(_ user: Habitflow_Auth_V1_User) -> PersonRecord? {
        guard let id = UUID(uuidString: user.id) else { return nil }
        return PersonRecord(
            id: id, username: user.username, displayName: user.displayName.isEmpty ? user.username : user.displayName)
    }
}
