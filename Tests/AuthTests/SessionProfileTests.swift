import Foundation
import HabitFlowAuthProtos
import HabitFlowEvents
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

@testable import HabitFlowAuth

extension AuthServiceTests {
    @Suite("sessions")
    struct SessionTests {
        @Test("ListSessions pages through the live sessions, marking the caller's own")
        func listSessions() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                var sessionIDs = [registered.tokens.sessionID]
                for _ in 0..<2 {
                    env.clock.advance(seconds: 1)
                    sessionIDs.append(
                        try await env.login(email: registered.user.email, password: registered.password).tokens
                            .sessionID)
                }
                var request = Habitflow_Auth_V1_ListSessionsRequest()
                request.pageSize = 2
                let firstPage = try await env.auth.listSessions(request, options: registered.options)
                #expect(firstPage.sessions.map(\.id) == [sessionIDs[2], sessionIDs[1]])
                #expect(!firstPage.nextPageToken.isEmpty)
                request.pageToken = firstPage.nextPageToken
                let secondPage = try await env.auth.listSessions(request, options: registered.options)
                #expect(secondPage.sessions.map(\.id) == [sessionIDs[0]])
                #expect(secondPage.sessions.first?.current == true)
                #expect(secondPage.sessions.first?.clientAddress == registered.clientAddress)
                #expect(secondPage.sessions.first?.deviceName == "test device")
                #expect(secondPage.nextPageToken.isEmpty)

                request.pageToken = "garbage!"
                #expect(
                    await env.error { try await env.auth.listSessions(request, options: registered.options) }?.code
                        == .invalidArgument)
                request.pageToken = ""
                request.pageSize = -1
                #expect(
                    await env.error { try await env.auth.listSessions(request, options: registered.options) }?.code
                        == .invalidArgument)
            }
        }

        @Test("RevokeSession ends one of the caller's sessions; another account's session is NOT_FOUND")
        func revokeSession() async throws {
            try await AuthTestEnvironment.run { env in
                let owner = try await env.register()
                let phone = try await env.login(email: owner.user.email, password: owner.password)
                var request = Habitflow_Auth_V1_RevokeSessionRequest()
                request.sessionID = phone.tokens.sessionID
                _ = try await env.auth.revokeSession(request, options: owner.options)
                _ = try await env.auth.revokeSession(request, options: owner.options)  // again: idempotent
                #expect(try await env.sessionState(phone.tokens, userID: owner.user.id) == .revoked)
                #expect(await env.error { try await env.refresh(phone.tokens.refreshToken) }?.code == .unauthenticated)

                let stranger = try await env.register()
                request.sessionID = stranger.tokens.sessionID
                #expect(
                    await env.error { try await env.auth.revokeSession(request, options: owner.options) }?.code
                        == .notFound)
                #expect(try await env.sessionState(stranger.tokens, userID: stranger.user.id) == .active)
                request.sessionID = "nope"
                #expect(
                    await env.error { try await env.auth.revokeSession(request, options: owner.options) }?.code
                        == .invalidArgument)
            }
        }

        @Test("Logout ends the caller's session; LogoutEverywhere ends all, or all but the caller's")
        func logout() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let second = try await env.login(email: registered.user.email, password: registered.password)
                let third = try await env.login(email: registered.user.email, password: registered.password)
                _ = try await env.auth.logout(Habitflow_Auth_V1_LogoutRequest(), options: registered.options)
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .revoked)
                #expect(
                    await env.error { try await env.refresh(registered.tokens.refreshToken) }?.code == .unauthenticated)

                var everywhere = Habitflow_Auth_V1_LogoutEverywhereRequest()
                everywhere.keepCurrentSession = true
                let secondOptions = CallOptions.onBehalf(of: registered.id, sessionID: second.tokens.sessionID)
                #expect(
                    try await env.auth.logoutEverywhere(everywhere, options: secondOptions).revokedSessionCount == 1)
                #expect(try await env.sessionState(second.tokens, userID: registered.user.id) == .active)
                #expect(try await env.sessionState(third.tokens, userID: registered.user.id) == .revoked)
                everywhere.keepCurrentSession = false
                #expect(
                    try await env.auth.logoutEverywhere(everywhere, options: secondOptions).revokedSessionCount == 1)
                #expect(try await env.sessionState(second.tokens, userID: registered.user.id) == .revoked)
            }
        }

        @Test("calls that need a signed-in user are UNAUTHENTICATED without one")
        func needsUser() async throws {
            try await AuthTestEnvironment.run { env in
                let anonymous = CallOptions.fromClient("203.0.113.5")
                let calls: [() async throws -> Any] = [
                    { try await env.auth.logout(.init(), options: anonymous) },
                    { try await env.auth.logoutEverywhere(.init(), options: anonymous) },
                    { try await env.auth.listSessions(.init(), options: anonymous) },
                    { try await env.auth.revokeSession(.init(), options: anonymous) },
                    { try await env.auth.getProfile(.init(), options: anonymous) },
                    { try await env.auth.updateProfile(.init(), options: anonymous) },
                    { try await env.auth.changePassword(.init(), options: anonymous) },
                    { try await env.auth.requestEmailChange(.init(), options: anonymous) },
                    { try await env.auth.deleteAccount(.init(), options: anonymous) },
                ]
                for call in calls {
                    #expect(await env.error { try await call() }?.code == .unauthenticated)
                }
                // A user without a session (an internal call on a user's behalf) cannot log a session out.
                let registered = try await env.register()
                let sessionless = CallOptions.onBehalf(of: registered.id)
                #expect(
                    await env.error { try await env.auth.logout(.init(), options: sessionless) }?.errorReason
                        == "SESSION_REQUIRED")
            }
        }

        @Test("CheckSession: active, revoked, not found for another user or unknown ids, invalid ids refused")
        func checkSession() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .active)
                let stranger = try await env.register()
                #expect(try await env.sessionState(registered.tokens, userID: stranger.user.id) == .notFound)
                var unknown = registered.tokens
                unknown.sessionID = UUID().uuidString
                #expect(try await env.sessionState(unknown, userID: registered.user.id) == .notFound)
                var request = Habitflow_Auth_V1_CheckSessionRequest()
                request.sessionID = "x"
                let error = await env.error { try await env.authInternal.checkSession(request) }
                #expect(Set(error?.fieldViolations.map(\.field) ?? []) == ["session_id", "user_id"])
            }
        }
    }

    @Suite("profile")
    struct ProfileTests {
        @Test("GetProfile and UpdateProfile with an update mask; changes publish UserUpdated")
        func updateProfile() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                #expect(try await env.auth.getProfile(.init(), options: registered.options) == registered.user)

                var request = Habitflow_Auth_V1_UpdateProfileRequest()
                request.user.displayName = "Ana María"
                request.user.timeZone = "Asia/Tokyo"
                request.user.username = "ignored_not_in_mask"
                request.updateMask = Google_Protobuf_FieldMask(protoPaths: ["display_name", "time_zone"])
                let updated = try await env.auth.updateProfile(request, options: registered.options)
                #expect(updated.displayName == "Ana María")
                #expect(updated.timeZone == "Asia/Tokyo")
                #expect(updated.username == registered.user.username)
                #expect(try await env.auth.getProfile(.init(), options: registered.options) == updated)

                // Without a mask: the fields that are set.
                var noMask = Habitflow_Auth_V1_UpdateProfileRequest()
                let newName = "renamed_\(UUID().uuidString.prefix(6))"
                noMask.user.username = newName
                #expect(try await env.auth.updateProfile(noMask, options: registered.options).username == newName)

                let updates = {
                    Set(env.events.events("habitflow.events.v1.UserUpdated", aggregateID: registered.user.id).map(\.id))
                }
                let delivered = try await eventually(timeout: .seconds(30)) { updates().count == 2 }
                #expect(delivered)
                let last = try #require(
                    env.events.events("habitflow.events.v1.UserUpdated", aggregateID: registered.user.id).last)
                let event = try Habitflow_Events_V1_UserUpdated(serializedBytes: last.payload)
                #expect(event.username == newName)
                #expect(event.timeZone == "Asia/Tokyo")
                #expect(event.displayName == "Ana María")

                // Setting the same values changes nothing and publishes nothing.
                _ = try await env.auth.updateProfile(noMask, options: registered.options)
                let pending = try await env.pool.queryRow(
                    """
                    SELECT count(*) FROM outbox \
                    WHERE aggregate_id = \(registered.user.id) AND event_type = 'habitflow.events.v1.UserUpdated'
                    """
                )
                #expect(try pending?.decode(0, as: Int.self) == 0)
                #expect(updates().count == 2)
            }
        }

        @Test("UpdateProfile refuses unknown mask paths, invalid values and a taken username")
        func updateProfileErrors() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let other = try await env.register()
                var request = Habitflow_Auth_V1_UpdateProfileRequest()
                request.updateMask = Google_Protobuf_FieldMask(protoPaths: ["email", "username"])
                request.user.username = "ok_name_\(UUID().uuidString.prefix(4))"
                let badPath = await env.error { try await env.auth.updateProfile(request, options: registered.options) }
                #expect(badPath?.fieldViolations.map(\.field) == ["update_mask"])

                request.updateMask = Google_Protobuf_FieldMask(protoPaths: ["username", "time_zone"])
                request.user.username = "x"
                request.user.timeZone = "+02:00"
                let invalid = await env.error { try await env.auth.updateProfile(request, options: registered.options) }
                #expect(Set(invalid?.fieldViolations.map(\.field) ?? []) == ["user.username", "user.time_zone"])

                request.updateMask = Google_Protobuf_FieldMask(protoPaths: ["username"])
                request.user.username = other.user.username.uppercased()
                #expect(
                    await env.error { try await env.auth.updateProfile(request, options: registered.options) }?.code
                        == .alreadyExists)

                let empty = await env.error { try await env.auth.updateProfile(.init(), options: registered.options) }
                #expect(empty?.fieldViolations.map(\.field) == ["update_mask"])
            }
        }
    }

    @Suite("internal lookups")
    struct LookupTests {
        @Test("LookupUsers by email or username ignoring case, GetUsers by id; unknown ones left out; limits enforced")
        func lookups() async throws {
            try await AuthTestEnvironment.run { env in
                let ana = try await env.register()
                let ben = try await env.register()
                // Services only: they answer with emails, so a call the gateway forwarded for a client is refused.
                #expect(
                    await env.error { try await env.authInternal.getUsers(.with { $0.userIds = [ana.user.id] }) }?.code
                        == .permissionDenied)
                try await env.withInternalClient(signedAs: "social") { lookups in
                    var lookup = Habitflow_Auth_V1_LookupUsersRequest()
                    lookup.emails = [ana.user.email.uppercased(), "nobody@example.com"]
                    lookup.usernames = [ben.user.username.uppercased()]
                    let found = try await lookups.lookupUsers(lookup)
                    #expect(Set(found.users.map(\.id)) == [ana.user.id, ben.user.id])
                    #expect(try await lookups.lookupUsers(.init()).users.isEmpty)

                    var get = Habitflow_Auth_V1_GetUsersRequest()
                    get.userIds = [ana.user.id, UUID().uuidString]
                    #expect(try await lookups.getUsers(get).users.map(\.id) == [ana.user.id])
                    get.userIds = ["not-a-uuid"]
                    #expect(
                        await env.error { try await lookups.getUsers(get) }?.fieldViolations.map(\.field) == [
                            "user_ids[0]"
                        ])
                    get.userIds = (0...500).map { _ in UUID().uuidString }
                    #expect(await env.error { try await lookups.getUsers(get) }?.code == .invalidArgument)
                    lookup.emails = (0...100).map { "u\($0)@example.com" }
                    #expect(
                        await env.error { try await lookups.lookupUsers(lookup) }?.fieldViolations.map(\.field)
                            == ["emails"])
                }
            }
        }
    }
}
