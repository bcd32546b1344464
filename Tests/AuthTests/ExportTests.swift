import Foundation
import HabitFlowAuthProtos
import HabitFlowRPC
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

@testable import HabitFlowAuth

extension AuthServiceTests {
    /// `AuthInternal/ExportUser`, called as the gateway's export calls it (caller "gateway-export").
    @Suite("data export")
    struct ExportTests {
        static let exporter = "gateway-export"

        static func export(_ client: Habitflow_Auth_V1_AuthInternal.Client, _ userID: String) async throws
            -> Habitflow_Auth_V1_ExportUserResponse
        {
            try await client.exportUser(.with { $0.userID = userID })
        }

        @Test("the profile as GetProfile shows it and every session, ended ones with when and why; no other account's")
        func profileAndSessions() async throws {
            try await AuthTestEnvironment.run { env in
                let phoneID = UUID()
                let registered = try await env.register(deviceID: phoneID, deviceName: "Ana's phone")
                env.clock.advance(seconds: 1)
                let laptop = try await env.login(email: registered.user.email, password: registered.password)
                env.clock.advance(seconds: 1)
                let tablet = try await env.login(email: registered.user.email, password: registered.password)
                env.clock.advance(seconds: 1)
                _ = try await env.auth.revokeSession(
                    .with { $0.sessionID = tablet.tokens.sessionID }, options: registered.options)
                let revokedAt = env.clock.now()
                var update = Habitflow_Auth_V1_UpdateProfileRequest()
                update.user.displayName = "Ana B."
                update.user.timeZone = "America/Sao_Paulo"
                update.updateMask.paths = ["display_name", "time_zone"]
                _ = try await env.auth.updateProfile(update, options: registered.options)
                let stranger = try await env.register()
                _ = try await env.login(email: stranger.user.email, password: stranger.password)

                let profile = try await env.auth.getProfile(.init(), options: registered.options)
                let live = try await env.auth.listSessions(.init(), options: registered.options).sessions
                try await env.withInternalClient(signedAs: Self.exporter) { client in
                    let export = try await Self.export(client, registered.user.id)
                    #expect(export.user == profile)
                    #expect(export.user.displayName == "Ana B." && export.user.timeZone == "America/Sao_Paulo")
                    #expect(
                        export.sessions.map(\.session.id)
                            == [registered.tokens.sessionID, laptop.tokens.sessionID, tablet.tokens.sessionID])
                    #expect(export.sessions.map(\.state) == [.active, .active, .revoked])
                    #expect(export.sessions.map(\.revokeReason) == [.unspecified, .unspecified, .revoked])
                    #expect(export.sessions.map(\.hasRevokeTime) == [false, false, true])
                    #expect(abs(export.sessions[2].revokeTime.date.timeIntervalSince(revokedAt)) < 0.001)
                    #expect(export.sessions[0].session.deviceID == phoneID.uuidString.lowercased())
                    #expect(export.sessions[0].session.deviceName == "Ana's phone")
                    #expect(export.sessions.allSatisfy { !$0.session.current })
                    // The live ones exactly as ListSessions shows them (there `current` marks the caller's).
                    let exportedLive = export.sessions.filter { $0.state == .active }.map(\.session)
                    var listed = live.sorted { $0.createTime.date < $1.createTime.date }
                    for index in listed.indices { listed[index].current = false }
                    #expect(exportedLive == listed)
                    #expect(export.linkedIdentities.isEmpty)
                    // Never a secret.
                    let text = try export.jsonString()
                    for secret in [
                        registered.password, registered.tokens.refreshToken, laptop.tokens.refreshToken,
                        registered.tokens.accessToken,
                    ] {
                        #expect(!text.contains(secret))
                    }

                    let other = try await Self.export(client, stranger.user.id)
                    #expect(other.user.id == stranger.user.id)
                    #expect(other.sessions.count == 2)
                    #expect(Set(other.sessions.map(\.session.id)).isDisjoint(with: export.sessions.map(\.session.id)))
                }
            }
        }

        @Test("linked social identities: provider, subject, the vouched email and when they were linked")
        func linkedIdentities() async throws {
            let providers = try FakeIdentityProviders()
            defer { providers.remove() }
            try await AuthTestEnvironment.run(configure: { providers.configure(&$0) }) { env in
                let subject = "google-\(UUID().uuidString)"
                let email = "lee.\(UUID().uuidString.prefix(6).lowercased())@gmail.com"
                var request = Habitflow_Auth_V1_SocialLoginRequest()
                request.credential.provider = .google
                request.credential.idToken = try providers.googleToken(
                    subject: subject, email: email, now: env.clock.now())
                request.device.deviceName = "Lee's watch"
                let linkedAt = env.clock.now()
                let signedIn = try await env.auth.socialLogin(request, options: .fromClient("203.0.113.30"))
                try await env.withInternalClient(signedAs: Self.exporter) { client in
                    let export = try await Self.export(client, signedIn.user.id)
                    #expect(export.user.linkedProviders == [.google])
                    #expect(!export.user.passwordSet)
                    #expect(export.linkedIdentities.map(\.provider) == [.google])
                    #expect(export.linkedIdentities.map(\.subject) == [subject])
                    #expect(export.linkedIdentities.map(\.email) == [email])
                    #expect(abs(export.linkedIdentities[0].linkTime.date.timeIntervalSince(linkedAt)) < 0.001)
                    #expect(export.sessions.map(\.session.deviceName) == ["Lee's watch"])
                }
            }
        }

        @Test("refused to calls the gateway forwards and to a bad user_id; an unknown or deleted account is empty")
        func refusalsAndUnknownAccounts() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                // `authInternal` signs as "gateway": what a client's call through the gateway would look like.
                let forwarded = await expectError(.permissionDenied) {
                    _ = try await Self.export(env.authInternal, registered.user.id)
                }
                #expect(forwarded?.errorReason == "INTERNAL_ONLY")
                // The gateway's own calls of the other methods stay allowed.
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .active)

                try await env.withInternalClient(signedAs: Self.exporter) { client in
                    await expectError(.invalidArgument, field: "user_id") { _ = try await Self.export(client, "nope") }
                    await expectError(.invalidArgument, field: "user_id") { _ = try await Self.export(client, "") }

                    let nobody = try await Self.export(client, UUID().uuidString.lowercased())
                    #expect(nobody == Habitflow_Auth_V1_ExportUserResponse())

                    #expect(try await Self.export(client, registered.user.id).hasUser)
                    _ = try await env.auth.deleteAccount(
                        .with { $0.password = registered.password }, options: registered.options)
                    let deleted = try await Self.export(client, registered.user.id)
                    #expect(deleted == Habitflow_Auth_V1_ExportUserResponse())
                }
            }
        }
    }
}
