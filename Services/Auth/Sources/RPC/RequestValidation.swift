internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowAuthProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto
internal import HabitFlowServiceAPI

// How auth checks what clients send: every request field's rule (from `AccountRules`), the update mask of
// UpdateProfile and social credentials. Problems become `INVALID_ARGUMENT` with every
// field violation of the request.

/// Auth's rules for the fields clients send, on top of the shared checks. Each check appends a field violation
/// instead of throwing, so one answer lists every problem of a request.
extension RequestValidator {
    // MARK: - Fields

    /// An address of the form local@domain.tld: printable ASCII, one '@', a dotted domain. Returns it trimmed.
    mutating func email(_ raw: String, field: String) -> String {
        let email = raw.trimmingCharacters(in: .whitespaces)
        guard !email.isEmpty else {
            reject(field, "is required")
            return email
        }
        guard email.utf8.count <= AccountRules.emailMaximumLength else {
            reject(field, "must be at most \(AccountRules.emailMaximumLength) characters")
            return email
        }
        guard AccountRules.isValidEmail(email) else {
            reject(field, "must be an email address such as name@example.com")
            return email
        }
        return email
    }

    /// 3 to 30 letters, digits, '_' or '.' (the same rule as the database's CHECK).
    mutating func username(_ raw: String, field: String) -> String {
        let username = raw.trimmingCharacters(in: .whitespaces)
        if username.isEmpty {
            reject(field, "is required")
        } else if !AccountRules.isValidUsername(username) {
            reject(field, "must be 3 to 30 characters: letters, digits, '_' and '.'")
        }
        return username
    }

    /// A new password (``AccountRules/passwordProblem(_:email:)``).
    mutating func password(_ password: String, field: String, email: String?) {
        if password.utf8.isEmpty {
            reject(field, "is required")
        } else if let problem = AccountRules.passwordProblem(password, email: email) {
            reject(field, problem)
        }
    }

    /// An IANA zone name such as "Europe/Berlin" ("UTC" when empty); never an offset like "GMT+2". The same rule as
    /// every service's (`UserTimeZone(named:)`): the system's tz database resolves it, current names included
    /// ("Asia/Kolkata", which Foundation's list of known identifiers on Linux only has as "Asia/Calcutta").
    mutating func timeZone(_ raw: String, field: String) -> String {
        let zone = raw.trimmingCharacters(in: .whitespaces)
        if zone.isEmpty { return "UTC" }
        if UserTimeZone(named: zone) == nil {
            reject(field, "must be an IANA time zone such as \"Europe/Berlin\" or \"UTC\"")
        }
        return zone
    }

    /// Up to 100 characters without control characters; trimmed.
    mutating func displayName(_ raw: String, field: String) -> String {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        text(name, field: field, maximumLength: AccountRules.displayNameMaximumLength)
        return name
    }

    /// A device: an optional UUID and an optional name.
    mutating func device(_ device: Habitflow_Auth_V1_DeviceInfo, field: String) -> DeviceDetails {
        var id: UUID?
        if !device.deviceID.isEmpty {
            id = UUID(canonical: device.deviceID)
            if id == nil { reject("\(field).device_id", "must be a UUID") }
        }
        let name = device.deviceName.trimmingCharacters(in: .whitespacesAndNewlines)
        text(name, field: "\(field).device_name", maximumLength: AccountRules.deviceNameMaximumLength)
        return DeviceDetails(id: id, name: name)
    }

    /// A UUID string; records a violation and returns nil otherwise.
    mutating func uuid(_ raw: String, field: String) -> UUID? {
        if raw.isEmpty {
            reject(field, "is required")
            return nil
        }
        guard let id = UUID(canonical: raw) else {
            reject(field, "must be a UUID")
            return nil
        }
        return id
    }

    mutating func required(_ value: String, field: String) {
        if value.isEmpty { reject(field, "is required") }
    }

    /// Lengths count Unicode scalars, as Postgres's `length()` does in the CHECK constraints.
    private mutating func text(_ value: String, field: String, maximumLength: Int) {
        if value.unicodeScalars.count > maximumLength {
            reject(field, "must be at most \(maximumLength) characters")
        } else if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            reject(field, "must not contain control characters")
        }
    }

    // MARK: - Whole inputs

    /// A social credential's provider and ID token, checked on their own (after the rest of the request).
    static func socialCredential(_ credential: Habitflow_Auth_V1_SocialCredential, field: String) throws
        -> SocialProviderName
    {
        var rules = RequestValidator()
        let name = SocialProviderName(credential.provider)
        if name == nil { rules.reject("\(field).provider", "must be GOOGLE or APPLE") }
        rules.required(credential.idToken, field: "\(field).id_token")
        guard let name, rules.violations.isEmpty else { throw RPCError.invalidArgument(rules.violations) }
        return name
    }

    /// The email a provider vouched for, trimmed, when it is a valid address; nil otherwise.
    static func vouchedEmail(of identity: VerifiedIdentity) -> String? {
        var rules = RequestValidator()
        let email = rules.email(identity.email ?? "", field: "credential.id_token.email")
        guard identity.emailVerified, rules.violations.isEmpty else { return nil }
        return email
    }
}

/// Which profile fields an UpdateProfile changes: the mask's paths, or without a mask the fields that are set.
struct ProfileMask {
    var username = false
    var displayName = false
    var timeZone = false

    init(_ request: Habitflow_Auth_V1_UpdateProfileRequest) throws {
        guard request.hasUpdateMask else {
            username = !request.user.username.isEmpty
            displayName = !request.user.displayName.isEmpty
            timeZone = !request.user.timeZone.isEmpty
            guard username || displayName || timeZone else {
                throw RPCError.invalidArgument(field: "update_mask", "name at least one field to update")
            }
            return
        }
        var violations: [FieldViolation] = []
        for path in request.updateMask.paths {
            switch path {
            case "username": username = true
            case "display_name": displayName = true
            case "time_zone": timeZone = true
            default:
                violations.append(
                    FieldViolation(
                        field: "update_mask",
                        description: "\"\(path)\" cannot be updated (username, display_name, time_zone can)"))
            }
        }
        if request.updateMask.paths.isEmpty {
            violations.append(FieldViolation(field: "update_mask", description: "name at least one field to update"))
        }
        if !violations.isEmpty { throw RPCError.invalidArgument(violations) }
    }
}
