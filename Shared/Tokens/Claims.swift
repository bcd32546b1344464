import Foundation

/// The registered claims (RFC 7519 §4.1) and the OIDC ones we read, all optional: each verifier says which it needs.
struct JWTClaims: Codable, Sendable {
    var iss: String?
    var sub: String?
    var aud: Audience?
    var exp: NumericDate?
    var nbf: NumericDate?
    var iat: NumericDate?
    var jti: String?
    /// Our session id (OIDC's `sid` claim name, RFC 9068 style).
    var sid: String?
    var email: String?
    var emailVerified: FlexibleBool?
    var nonce: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, nbf, iat, jti, sid, email, nonce
        case emailVerified = "email_verified"
    }

    /// The value of a string claim that must be present and non-empty.
    func require(_ value: String?, _ name: String) throws(TokenError) -> String {
        guard let value, !value.isEmpty else { throw .missingClaim(name) }
        return value
    }

    /// `exp` and `iat` must be present; `exp`, `iat` and `nbf` are checked against `now` with `leeway` either side.
    func checkTimes(now: Date, leeway: TimeInterval) throws(TokenError) -> (issuedAt: Date, expiresAt: Date) {
        guard let expiresAt = exp?.date else { throw .missingClaim("exp") }
        guard let issuedAt = iat?.date else { throw .missingClaim("iat") }
        if now.timeIntervalSince(expiresAt) >= leeway { throw .expired }
        if issuedAt.timeIntervalSince(now) > leeway { throw .notYetValid }
        if let notBefore = nbf?.date, notBefore.timeIntervalSince(now) > leeway { throw .notYetValid }
        return (issuedAt, expiresAt)
    }
}

/// `aud`: one string or an array of strings (RFC 7519 §4.1.3).
enum Audience: Codable, Sendable, Hashable {
    case one(String)
    case many([String])

    var values: [String] {
        switch self {
        case .one(let value): [value]
        case .many(let values): values
        }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(String.self) {
            self = .one(value)
        } else {
            self = .many(try container.decode([String].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .one(let value): try container.encode(value)
        case .many(let values): try container.encode(values)
        }
    }
}

/// A JSON number of seconds since 1970 (RFC 7519 §2), possibly fractional; written as whole seconds.
struct NumericDate: Codable, Sendable, Hashable {
    /// Year 9999: later values are nonsense, and would make `Date` arithmetic lose precision.
    static let latest: Double = 253_402_300_799

    var date: Date

    init(_ date: Date) {
        self.date = date
    }

    init(from decoder: any Decoder) throws {
        let seconds = try decoder.singleValueContainer().decode(Double.self)
        guard seconds.isFinite, (0...Self.latest).contains(seconds) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "out of range"))
        }
        date = Date(timeIntervalSince1970: seconds)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Int64(date.timeIntervalSince1970.rounded(.down)))
    }
}

/// A boolean claim that some providers send as a string: Apple's `email_verified` is `"true"` or `"false"`.
struct FlexibleBool: Codable, Sendable, Hashable {
    var value: Bool

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self.value = value
            return
        }
        switch try container.decode(String.self) {
        case "true": value = true
        case "false": value = false
        default:
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "not a boolean"))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

extension Duration {
    /// The duration in seconds, as `Date` arithmetic wants it.
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
