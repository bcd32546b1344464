/// A Postgres type, by its OID.
public struct PostgresType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// "Let the server infer it from the context" (like an untyped literal).
    public static let unspecified = PostgresType(rawValue: 0)
    public static let bool = PostgresType(rawValue: 16)
    public static let bytea = PostgresType(rawValue: 17)
    public static let int8 = PostgresType(rawValue: 20)
    public static let int2 = PostgresType(rawValue: 21)
    public static let int4 = PostgresType(rawValue: 23)
    public static let text = PostgresType(rawValue: 25)
    public static let json = PostgresType(rawValue: 114)
    public static let varchar = PostgresType(rawValue: 1043)
    public static let date = PostgresType(rawValue: 1082)
    public static let timestamp = PostgresType(rawValue: 1114)
    public static let timestamptz = PostgresType(rawValue: 1184)
    public static let numeric = PostgresType(rawValue: 1700)
    public static let uuid = PostgresType(rawValue: 2950)
    public static let jsonb = PostgresType(rawValue: 3802)
    public static let boolArray = PostgresType(rawValue: 1000)
    public static let int2Array = PostgresType(rawValue: 1005)
    public static let int4Array = PostgresType(rawValue: 1007)
    public static let textArray = PostgresType(rawValue: 1009)
    public static let int8Array = PostgresType(rawValue: 1016)
    public static let uuidArray = PostgresType(rawValue: 2951)

    public var description: String { "oid \(rawValue)" }
}

/// One encoded parameter: its declared type, wire format and bytes (`nil` is SQL NULL).
public struct PostgresBind: Sendable {
    public enum Format: Int32, Sendable { case text = 0, binary = 1 }

    public var type: PostgresType
    public var format: Format
    public var bytes: [UInt8]?

    public init(type: PostgresType, format: Format = .text, bytes: [UInt8]?) {
        self.type = type
        self.format = format
        self.bytes = bytes
    }

    public static func text(_ text: String, type: PostgresType) -> PostgresBind {
        PostgresBind(type: type, format: .text, bytes: Array(text.utf8))
    }
}

/// A parameterized statement: SQL text with `$1`, `$2`, ... placeholders and the values bound to them.
///
/// Written as a string literal with interpolations, every interpolated value becomes a bind parameter, never SQL
/// text, so a query cannot be built from strings by accident:
///
/// ```swift
/// try await pool.query("SELECT name FROM habits WHERE user_id = \(userID) AND id = \(habitID)")
/// // SQL: SELECT name FROM habits WHERE user_id = $1 AND id = $2
/// ```
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public private(set) var sql: String
    public private(set) var binds: [PostgresBind]

    /// SQL with explicit placeholders and their values, in order.
    public init(_ sql: StaticString, _ values: [any PostgresEncodable]) {
        self.sql = sql.description
        self.binds = values.map { $0.postgresBind() }
    }

    public init(stringLiteral value: StaticString) {
        self.sql = value.description
        self.binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.binds = stringInterpolation.binds
    }

    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var sql = ""
        var binds: [PostgresBind] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: StaticString) {
            sql += literal.description
        }

        /// Binds `value` as the next parameter.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            binds.append(value.postgresBind())
            sql += "$\(binds.count)"
        }
    }

    /// The SQL only; values are never printed (they can be personal data).
    public var description: String { sql }
}
