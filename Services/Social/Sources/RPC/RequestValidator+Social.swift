internal import Foundation
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// The social service's own field rules, on top of the shared checks.
extension RequestValidator {
    /// An email address as typed (trimmed): 3 to 254 characters with one '@' that is neither first nor last.
    mutating func email(_ raw: String, field: String) -> String {
        let email = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        if !(3...254).contains(email.count) {
            reject(field, "must be 3 to 254 characters, got \(email.count)")
        } else if parts.count != 2 || parts[0].isEmpty || parts[1].isEmpty
            || email.unicodeScalars.contains(where: { $0.properties.isWhitespace })
        {
            reject(field, "must be an email address, for example sam@example.com")
        }
        return email
    }

    /// A username as typed (trimmed): 3 to 30 letters, digits, '_' and '.'.
    mutating func username(_ raw: String, field: String) -> String {
        let username = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        let allowed = username.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "."
        }
        if !(3...30).contains(username.count) || !allowed {
            reject(field, "must be 3 to 30 characters: letters, digits, '_' and '.'")
        }
        return username
    }

    /// A request kind filter: unset means both.
    mutating func kindFilter(_ proto: Habitflow_Social_V1_RequestKind, field: String) -> RequestKind? {
        if proto == .unspecified { return nil }
        guard let kind = RequestKind(proto) else {
            reject(field, "must be REQUEST_KIND_FRIEND or REQUEST_KIND_PARTNER, or unset for both")
            return nil
        }
        return kind
    }

    /// The row offset an offset-paged list continues at (0 for the first page).
    mutating func pageOffset(_ token: String, list: String, field: String = "page_token") -> Int {
        guard let fields = pageToken(token, list: list, fieldCount: 1, field: field) else { return 0 }
        guard let offset = Int(fields[0]), offset >= 0 else {
            reject(field, "is not a token this list returned")
            return 0
        }
        return offset
    }
}
