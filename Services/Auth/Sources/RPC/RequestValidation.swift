internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// The rules for the fields clients send, shared by every RPC that takes them. Each check appends a field violation
/// instead of throwing, so one answer lists every problem of a request.
struct FieldRules {
    private(set) var violations: [FieldViolation] = []

    static let emailMaximumLength = 254
    static let passwordByteRange = 8...72
    static let displayNameMaximumLength = 100
    static let deviceNameMaximumLength = 100

    mutating func fail(_ field: String, _ description: String) {
        violations.append(FieldViolation(field: field, description: description))
    }

    /// Throws `INVALID_ARGUMENT` with every violation collected, if any.
    func throwIfInvalid() throws {
        if !violations.isEmpty { throw RPCError.invalidArgument(violations) }
    }

    // MARK: - Fields

    /// An address of the form local@domain.tld: printable ASCII, one '@', a dotted domain. Returns it trimmed.
    mutating func email(_ raw: String, field: String) -> String {
        let email = raw.trimmingCharacters(in: .whitespaces)
        guard !email.isEmpty else {
            fail(field, "is required")
            return email
        }
        guard email.utf8.count <= Self.emailMaximumLength else {
            fail(field, "must be at most \(Self.emailMaximumLength) characters")
            return email
        }
        guard isValidEmail(email) else {
            fail(field, "must be an email address such as name@example.com")
            return email
        }
        return email
    }

    /// 3 to 30 letters, digits, '_' or '.' (the same rule as the database's CHECK).
    mutating func username(_ raw: String, field: String) -> String {
        let username = raw.trimmingCharacters(in: .whitespaces)
        if username.isEmpty {
            fail(field, "is required")
        } else if !Self.isValidUsername(username) {
            fail(field, "must be 3 to 30 characters: letters, digits, '_' and '.'")
        }
        return username
    }

    /// 8 to 72 bytes of UTF-8 (bcrypt reads no further), no NUL (crypt(3) would stop there), not the email.
    mutating func password(_ password: String, field: String, email: String?) {
        let bytes = password.utf8.count
        if bytes == 0 {
            fail(field, "is required")
        } else if !Self.passwordByteRange.contains(bytes) {
            fail(
                field, "must be \(Self.passwordByteRange.lowerBound) to \(Self.passwordByteRange.upperBound) bytes long"
            )
        } else if password.utf8.contains(0) {
            fail(field, "must not contain NUL characters")
        } else if let email, !email.isEmpty, password.lowercased() == email.lowercased() {
            fail(field, "must not be the email address")
        }
    }

    /// An IANA zone name such as "Europe/Berlin" ("UTC" when empty); never an offset like "GMT+2".
    mutating func timeZone(_ raw: String, field: String) -> String {
        let zone = raw.trimmingCharacters(in: .whitespaces)
        if zone.isEmpty { return "UTC" }
        if !Self.knownTimeZones.contains(zone) {
            fail(field, "must be an IANA time zone such as \"Europe/Berlin\" or \"UTC\"")
        }
        return zone
    }

    /// Up to 100 characters without control characters; trimmed.
    mutating func displayName(_ raw: String, field: String) -> String {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        text(name, field: field, maximumLength: Self.displayNameMaximumLength)
        return name
    }

    /// A device: an optional UUID and an optional name.
    mutating func device(_ device: Habitflow_Auth_V1_DeviceInfo, field: String) -> DeviceDetails {
        var id: UUID?
        if !device.deviceID.isEmpty {
            id = UUID(canonical: device.deviceID)
            if id == nil { fail("\(field).device_id", "must be a UUID") }
        }
        let name = device.deviceName.trimmingCharacters(in: .whitespacesAndNewlines)
        text(name, field: "\(field).device_name", maximumLength: Self.deviceNameMaximumLength)
        return DeviceDetails(id: id, name: name)
    }

    /// A UUID string; records a violation and returns nil otherwise.
    mutating func uuid(_ raw: String, field: String) -> UUID? {
        if raw.isEmpty {
            fail(field, "is required")
            return nil
        }
        guard let id = UUID(canonical: raw) else {
            fail(field, "must be a UUID")
            return nil
        }
        return id
    }

    mutating func required(_ value: String, field: String) {
        if value.isEmpty { fail(field, "is required") }
    }

    /// Lengths count Unicode scalars, as Postgres's `length()` does in the CHECK constraints.
    private mutating func text(_ value: String, field: String, maximumLength: Int) {
        if value.unicodeScalars.count > maximumLength {
            fail(field, "must be at most \(maximumLength) characters")
        } else if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            fail(field, "must not contain control characters")
        }
    }

    // MARK: - Predicates

    static func isValidUsername(_ username: String) -> Bool {
        (3...30).contains(username.utf8.count)
            && username.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: ".")
            }
    }

    private func isValidEmail(_ email: String) -> Bool {
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

    /// The IANA names the system's tz database knows. Foundation's list has neither "UTC" nor "Etc/UTC" (nor any
    /// "Etc/GMT+N" offset zone, which we would refuse anyway).
    static let knownTimeZones: Set<String> = Set(TimeZone.knownTimeZoneIdentifiers).union(["UTC", "Etc/UTC"])
}

/// The device a session is opened from, validated.
struct DeviceDetails: Sendable {
    var id: UUID?
    var name: String
}
