internal import Foundation

/// A mail auth writes to the outbox: one recipient, plain text.
struct AccountMail: Sendable {
    var recipient: String
    var subject: String
    var body: String

    /// The reset link and code, to the account's address.
    static func passwordReset(to user: UserRecord, token: OpaqueToken, linkBaseURL: String) -> AccountMail {
        tokenMail(
            to: user.email, subject: "Reset your HabitFlow password",
            intro: "Someone (hopefully you) asked to reset the password of your HabitFlow account.",
            link: "\(linkBaseURL)reset-password", token: token, validity: "1 hour")
    }

    /// The confirmation link and code, to the new address: using the token proves it reaches the account's owner.
    static func emailChange(of user: UserRecord, to newEmail: String, token: OpaqueToken, linkBaseURL: String)
        -> AccountMail
    {
        tokenMail(
            to: newEmail, subject: "Confirm your new HabitFlow email",
            intro: "Confirm that this address should become the email of the HabitFlow account \(user.username).",
            link: "\(linkBaseURL)confirm-email", token: token, validity: "24 hours")
    }

    /// To the old address after an email change, so an unwanted change does not go unnoticed.
    static func emailChanged(of previous: UserRecord, to newEmail: String) -> AccountMail {
        AccountMail(
            recipient: previous.email, subject: "Your HabitFlow email was changed",
            body: """
                The email of your HabitFlow account \(previous.username) is now \(newEmail).
                If you did not do this, reset your password and contact support.
                """)
    }

    /// A mail with a link made of `link` and the token, and the token alone as a code.
    private static func tokenMail(
        to recipient: String, subject: String, intro: String, link: String, token: OpaqueToken, validity: String
    ) -> AccountMail {
        let body = """
            \(intro)

            Open this link on your device:
            \(link)?token=\(token.value)

            or enter this code in the app:
            \(token.value)

            It works once and expires in \(validity). If you did not ask for this, ignore this mail.
            """
        return AccountMail(recipient: recipient, subject: subject, body: body)
    }
}
