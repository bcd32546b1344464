internal import CLibPQ

/// An error from Postgres or libpq, with the SQLSTATE where the server sent one.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        case connectionFailed
        case uniqueViolation
        case foreignKeyViolation
        case checkViolation
        case notNullViolation
        case serializationFailure
        case deadlockDetected
        case queryCanceled
        case insufficientPrivilege
        case syntaxError
        case other
    }

    public var kind: Kind
    /// The five-character SQLSTATE, for example `23505`.
    public var sqlState: String?
    /// The server's primary message. Never shown to RPC clients (it can quote SQL and values).
    public var message: String
    /// The violated constraint, for integrity errors.
    public var constraint: String?

    public init(kind: Kind, sqlState: String? = nil, message: String, constraint: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.constraint = constraint
    }

    init(result: OpaquePointer, connection: OpaquePointer) {
        func field(_ code: UInt8) -> String? {
            PQresultErrorField(result, Int32(code)).map { String(cString: $0) }
        }
        let sqlState = field(UInt8(ascii: "C"))
        self.init(
            kind: Self.kind(forSQLState: sqlState, connectionBad: PQstatus(connection) != CONNECTION_OK),
            sqlState: sqlState,
            message: field(UInt8(ascii: "M")) ?? String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines(),
            constraint: field(UInt8(ascii: "n")))
    }

    static func kind(forSQLState sqlState: String?, connectionBad: Bool) -> Kind {
        switch sqlState {
        case "23505": .uniqueViolation
        case "23503": .foreignKeyViolation
        case "23514": .checkViolation
        case "23502": .notNullViolation
        case "40001": .serializationFailure
        case "40P01": .deadlockDetected
        case "57014": .queryCanceled
        case "42501": .insufficientPrivilege
        case "42601": .syntaxError
        case let state? where state.hasPrefix("08"): .connectionFailed
        case nil where connectionBad: .connectionFailed
        default: .other
        }
    }

    public var description: String {
        "Postgres \(sqlState.map { "[\($0)] " } ?? "")\(message)"
    }
}
