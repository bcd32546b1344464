import Foundation
import HabitFlowAuthProtos
import HabitFlowEvents
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import Testing

@testable import HabitFlowAuth

extension AuthServiceTests {
    @Suite("passwords, reset and email change")
    struct AccountRecoveryTests {
        @Test("ChangePassword checks the current password and signs out every other session")
        func changePassword() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let other = try await env.login(email: registered.user.email, password: registered.password)
                var request = Habitflow_Auth_V1_ChangePasswordRequest()
                request.currentPassword = "not it at all"
                request.newPassword = "a brand new secret"
                let wrong = await env.error { try await env.auth.changePassword(request, options: registered.options) }
                #expect(wrong?.fieldViolations.map(\.field) == ["current_password"])

                request.currentPassword = registered.password
                request.newPassword = "short"
                let weak = await env.error { try await env.auth.changePassword(request, options: registered.options) }
                #expect(weak?.fieldViolations.map(\.field) == ["new_password"])
                request.newPassword = registered.user.email
                #expect(
                    await env.error { try await env.auth.changePassword(request, options: registered.options) }?.code
                        == .invalidArgument)

                request.newPassword = "a brand new secret"
                _ = try await env.auth.changePassword(request, options: registered.options)
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .active)
                #expect(try await env.sessionState(other.tokens, userID: registered.user.id) == .revoked)
                #expect(
                    await env.error {
                        try await env.login(email: registered.user.email, password: registered.password)
                    }?.code == .unauthenticated)
                _ = try await env.login(email: registered.user.email, password: "a brand new secret")
            }
        }

        @Test("password reset: mailed over SMTP, single use, signs out every session, verifies the email")
        func passwordReset() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                var request = Habitflow_Auth_V1_RequestPasswordResetRequest()
                request.email = registered.user.email.uppercased()
                _ = try await env.auth.requestPasswordReset(request, options: .fromClient("203.0.113.50"))
                let token = try await env.mailedToken(
                    to: registered.user.email, subjectContaining: "Reset your HabitFlow password")
                let mail = try #require(env.smtp.messages(to: registered.user.email).last)
                #expect(mail.contains("habitflow://auth/reset-password?token=\(token)"))
                #expect(
                    env.smtp.received.last { $0.recipients.contains(registered.user.email) }?.from
                        == "no-reply@habitflow.local")
                // Only the token's hash is stored.
                let stored = try await env.pool.query(
                    """
                    SELECT token_hash FROM one_time_tokens \
                    WHERE user_id = \(registered.id) AND purpose = 'password_reset'
                    """
                )
                #expect(stored.count == 1)
                #expect(try !String(decoding: stored[0].decode(0, as: Data.self), as: UTF8.self).contains(token))
                // Sent mail does not stay in the outbox (it holds the token).
                #expect(
                    try await eventually(timeout: .seconds(30)) {
                        try await env.pool.queryRow(
                            "SELECT count(*) FROM mail_outbox WHERE user_id = \(registered.id)")?.decode(
                                0, as: Int.self) == 0
                    })

                var confirm = Habitflow_Auth_V1_ConfirmPasswordResetRequest()
                confirm.token = token
                confirm.newPassword = registered.user.email
                #expect(
                    await env.error { try await env.auth.confirmPasswordReset(confirm) }?.fieldViolations.map(\.field)
                        == ["new_password"])
                confirm.newPassword = "reset to this one"
                _ = try await env.auth.confirmPasswordReset(confirm)
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .revoked)
                let signedIn = try await env.login(email: registered.user.email, password: "reset to this one")
                #expect(signedIn.user.emailVerified)

                // Single use.
                confirm.newPassword = "and once more"
                let reused = await env.error { try await env.auth.confirmPasswordReset(confirm) }
                #expect(reused?.fieldViolations.map(\.field) == ["token"])
                confirm.token = ""
                #expect(await env.error { try await env.auth.confirmPasswordReset(confirm) }?.code == .invalidArgument)
            }
        }

        @Test("reset tokens expire after an hour; a newer request supersedes an older token")
        func resetTokenExpiry() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                var request = Habitflow_Auth_V1_RequestPasswordResetRequest()
                request.email = registered.user.email
                _ = try await env.auth.requestPasswordReset(request)
                let first = try await env.mailedToken(to: registered.user.email, subjectContaining: "Reset")
                _ = try await env.auth.requestPasswordReset(request)
                let arrived = try await eventually(timeout: .seconds(30)) { env.smtp.messages(to: registered.user.email).count == 2 }
                #expect(arrived)
                let second = try await env.mailedToken(to: registered.user.email, subjectContaining: "Reset")
                #expect(first != second)

                var confirm = Habitflow_Auth_V1_ConfirmPasswordResetRequest()
                confirm.newPassword = "superseded attempt"
                confirm.token = first
                #expect(await env.error { try await env.auth.confirmPasswordReset(confirm) }?.code == .invalidArgument)
                env.clock.advance(by: .seconds(3601))
                confirm.token = second
                #expect(await env.error { try await env.auth.confirmPasswordReset(confirm) }?.code == .invalidArgument)
                _ = try await env.login(email: registered.user.email, password: registered.password)
            }
        }

        @Test("a reset for an unknown email answers the same and sends nothing; reset requests are throttled")
        func resetUnknownAndThrottled() async throws {
            try await AuthTestEnvironment.run { env in
                let ghost = "ghost-\(UUID().uuidString.prefix(8))@example.com"
                var request = Habitflow_Auth_V1_RequestPasswordResetRequest()
                request.email = ghost
                _ = try await env.auth.requestPasswordReset(request, options: .fromClient("203.0.113.77"))
                let registered = try await env.register()
                request.email = registered.user.email
                _ = try await env.auth.requestPasswordReset(request, options: .fromClient("203.0.113.77"))
                _ = try await env.mailedToken(to: registered.user.email, subjectContaining: "Reset")
                #expect(env.smtp.messages(to: ghost).isEmpty)

                // Per email: three requests an hour, then a wait (the same for the unknown address).
                request.email = ghost
                for _ in 0..<3 {
                    _ = try? await env.auth.requestPasswordReset(request, options: .fromClient("203.0.113.78"))
                }
                let throttled = await env.error {
                    try await env.auth.requestPasswordReset(request, options: .fromClient("203.0.113.79"))
                }
                #expect(throttled?.code == .resourceExhausted)
                #expect(throttled?.retryDelay != nil)

                request.email = "not an email"
                #expect(
                    await env.error { try await env.auth.requestPasswordReset(request) }?.fieldViolations.map(\.field)
                        == ["email"])
            }
        }

        @Test("email change: password checked, confirmation mailed to the new address, old address told")
        func emailChange() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let taken = try await env.register()
                let newEmail = "moved-\(UUID().uuidString.prefix(8))@example.org"
                var request = Habitflow_Auth_V1_RequestEmailChangeRequest()
                request.newEmail = newEmail
                #expect(
                    await env.error { try await env.auth.requestEmailChange(request, options: registered.options) }?
                        .fieldViolations.map(\.field) == ["password"])
                request.password = "wrong password"
                #expect(
                    await env.error { try await env.auth.requestEmailChange(request, options: registered.options) }?
                        .fieldViolations.map(\.field) == ["password"])
                request.password = registered.password
                request.newEmail = taken.user.email
                #expect(
                    await env.error { try await env.auth.requestEmailChange(request, options: registered.options) }?
                        .code == .alreadyExists)
                request.newEmail = registered.user.email
                #expect(
                    await env.error { try await env.auth.requestEmailChange(request, options: registered.options) }?
                        .fieldViolations.map(\.field) == ["new_email"])

                request.newEmail = newEmail
                _ = try await env.auth.requestEmailChange(request, options: registered.options)
                let token = try await env.mailedToken(
                    to: newEmail, subjectContaining: "Confirm your new HabitFlow email")
                var confirm = Habitflow_Auth_V1_ConfirmEmailChangeRequest()
                confirm.token = token
                let changed = try await env.auth.confirmEmailChange(confirm).user
                #expect(changed.email == newEmail)
                #expect(changed.emailVerified)
                #expect(
                    try await eventually(timeout: .seconds(30)) {
                        env.smtp.messages(to: registered.user.email).contains { $0.contains("is now \(newEmail)") }
                    })
                _ = try await env.login(email: newEmail, password: registered.password)
                #expect(
                    await env.error {
                        try await env.login(email: registered.user.email, password: registered.password)
                    }?.code == .unauthenticated)
                #expect(
                    await env.error { try await env.auth.confirmEmailChange(confirm) }?.fieldViolations.map(\.field)
                        == ["token"])
            }
        }

        @Test("an email-change token expires after a day, and fails if the address was taken meanwhile")
        func emailChangeExpiryAndRace() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                let newEmail = "late-\(UUID().uuidString.prefix(8))@example.org"
                var request = Habitflow_Auth_V1_RequestEmailChangeRequest()
                request.newEmail = newEmail
                request.password = registered.password
                _ = try await env.auth.requestEmailChange(request, options: registered.options)
                let token = try await env.mailedToken(to: newEmail, subjectContaining: "Confirm")
                var confirm = Habitflow_Auth_V1_ConfirmEmailChangeRequest()
                confirm.token = token

                // Someone registers the address before the confirmation.
                var other = Habitflow_Auth_V1_RegisterRequest()
                other.email = newEmail
                other.username = "quick_\(UUID().uuidString.prefix(6))"
                other.password = "faster than you"
                _ = try await env.auth.register(other)
                #expect(await env.error { try await env.auth.confirmEmailChange(confirm) }?.code == .alreadyExists)

                let second = "later-\(UUID().uuidString.prefix(8))@example.org"
                request.newEmail = second
                _ = try await env.auth.requestEmailChange(request, options: registered.options)
                confirm.token = try await env.mailedToken(to: second, subjectContaining: "Confirm")
                env.clock.advance(by: .seconds(24 * 3600 + 1))
                #expect(await env.error { try await env.auth.confirmEmailChange(confirm) }?.code == .invalidArgument)
            }
        }
    }

    @Suite("account deletion")
    struct DeletionTests {
        @Test("deletion needs the password, removes the account and its sessions, and delivers UserDeleted")
        func deleteAccount() async throws {
            try await AuthTestEnvironment.run { env in
                let registered = try await env.register()
                var request = Habitflow_Auth_V1_DeleteAccountRequest()
                #expect(
                    await env.error { try await env.auth.deleteAccount(request, options: registered.options) }?
                        .fieldViolations.map(\.field) == ["password"])
                request.password = "not the password"
                #expect(
                    await env.error { try await env.auth.deleteAccount(request, options: registered.options) }?
                        .fieldViolations.map(\.field) == ["password"])
                request.password = registered.password
                _ = try await env.auth.deleteAccount(request, options: registered.options)

                #expect(
                    await env.error { try await env.auth.getProfile(.init(), options: registered.options) }?.code
                        == .notFound)
                #expect(try await env.sessionState(registered.tokens, userID: registered.user.id) == .notFound)
                #expect(
                    await env.error { try await env.refresh(registered.tokens.refreshToken) }?.code == .unauthenticated)
                #expect(
                    await env.error {
                        try await env.login(email: registered.user.email, password: registered.password)
                    }?.code == .unauthenticated)
                let leftovers = try await env.pool.queryRow(
                    """
                    SELECT (SELECT count(*) FROM sessions WHERE user_id = \(registered.id)) \
                    + (SELECT count(*) FROM refresh_tokens WHERE user_id = \(registered.id))
                    """)
                #expect(try leftovers?.decode(0, as: Int.self) == 0)

                let delivered = try await eventually(timeout: .seconds(30)) {
                    !env.events.events("habitflow.events.v1.UserDeleted", aggregateID: registered.user.id).isEmpty
                }
                #expect(delivered, "habits gets the event")
                let envelope = try #require(
                    env.events.events("habitflow.events.v1.UserDeleted", aggregateID: registered.user.id).first)
                #expect(
                    try Habitflow_Events_V1_UserDeleted(serializedBytes: envelope.payload).userID == registered.user.id)
                #expect(envelope.aggregateType == "user")
                // The email is free again.
                var again = Habitflow_Auth_V1_RegisterRequest()
                again.email = registered.user.email
                again.username = registered.user.username
                again.password = "starting over"
                _ = try await env.auth.register(again)
            }
        }
    }
}
