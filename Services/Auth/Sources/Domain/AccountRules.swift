internal import Foundation
internal import HabitFlowCrypto

/// What an account's fields may hold: the same rules as the database's CHECK constraints. Request validation
/// (`RPC/RequestValidation.swift`) reports a broken rule as a field violation.
enum AccountRules {
    static let emailMaximumLength = 254
    static let passwordByteRange = 8...72
    static let usernameLength = 3...30
    static let displayNameMaximumLength = 100
    static let deviceNameMaximumLength = 100

    /// What is wrong with a new password, or nil: 8 to 72 bytes of UTF-8 (bcrypt reads no further), no NUL (crypt(3)
    /// would stop there), not the email. An empty password is the caller's to refuse as missing.
    static func passwordProblem(_ password: String, email: String?) -> String? {
        if !passwordByteRange.contains(password.utf8.count) {
            return "must be \(passwordByteRange.lowerBound) to \(passwordByteRange.upperBound) bytes long"
        }
        if password.utf8.contains(0) { return "must not contain NUL characters" }
        if let email, !email.isEmpty, password.lowercased() == email.lowercased() {
            return "must not be the email address"
        }
        return nil
    }

    /// 3 to 30 letters, digits, '_' or '.'.
    static func isValidUsername(_ username: String) -> Bool {
        usernameLength.contains(username.utf8.count)
            && username.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: ".")
            }
    }

    /// An address of the form local@domain.tld: printable ASCII, one '@', a dotted domain.
    static func isValidEmail(_ email: String) -> Bool {
        // Printable ASCII only: keeps addresses safe to put in SMTP commands and headers (no CR/LF, no spaces).
        guard email.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, let local = parts.first, let domain = parts.last else { return false }
        guard (1...64).contains(local.utf8.count), !local.contains("<"), !local.contains(">") else { return false }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return false }
        return labels.allSatisfy { label in
            !label.isEmpty && label.count <= 63 && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { byte in
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                        || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                }
        }
    }

    /// The username of a new social account: the email's local part reduced to what usernames allow, 3 to 24
    /// characters (room for a random suffix when it is taken).
    static func usernameBase(fromEmail email: String) -> String {
        let local = email.prefix { $0 != "@" }.lowercased()
        var base = String(
            local.unicodeScalars.filter { scalar in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_"
                        || scalar == ".")
            }.prefix(24))
        if base.count < 3 { base = "user" }
        return base
    }

    /// The usernames a new social account tries, in order: the base, four with a random suffix, one random.
    static func usernameCandidates(fromEmail email: String) -> [String] {
        let base = usernameBase(fromEmail: email)
        var candidates = [base]
        for _ in 0..<4 { candidates.append(base.prefix(24) + "_" + randomDigits(4)) }
        candidates.append("user_" + randomDigits(10))
        return candidates
    }

    private static func randomDigits(_ count: Int) -> String {
        String(SecureRandom.bytes(count).map { Character(String($0 % 10)) })
    }
}
