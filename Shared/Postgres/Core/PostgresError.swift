internal import CLibPQ

/// An error from Postgres, libpq or this layer, with the SQLSTATE where the server sent one.
///
/// Services switch on ``kind`` to choose a gRPC status (for example `.uniqueViolation` is `ALREADY_EXISTS`,
/// `.serializationFailure` is retried, `.connectionLost` is `UNAVAILABLE`). ``message`` can quote SQL and values:
/// log it, never send it to a client.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Hashable {
        /// Could not open (or re-open) a connection: server down, bad credentials, bad URL.
        case connectionFailed
        /// The connection broke while a statement ran; whether it committed is unknown.
        case connectionLost
        case uniqueViolation
        case foreignKeyViolation
        case checkViolation
        case notNullViolation
        case serializationFailure
        case deadlockDetected
        case queryCanceled
        case insufficientPrivilege
        case syntaxError
        /// No connection became free within the pool's acquire timeout.
        case poolTimeout
        /// The pool was shut down.
        case poolClosed
        /// A parameter cannot be sent (for example text containing a NUL character).
        case invalidParameter
        /// A column could not be decoded as the requested Swift type (or a NULL into a non-optional).
        case decodingFailed
        /// A migration could not be applied, or an applied migration file changed.
        case migrationFailed
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
        if connectionBad { return .connectionLost }
        switch sqlState {
        case "23505": return .uniqueViolation
        case "23503": return .foreignKeyViolation
        case "23514": return .checkViolation
        case "23502": return .notNullViolation
        case "40001": return .serializationFailure
        case "40P01": return .deadlockDetected
        case "57014": return .queryCanceled
        case "42501": return .insufficientPrivilege
        case "42601": return .syntaxError
        // 57P01..03: admin shutdown, crash shutdown, cannot connect now.
        case let state? where state.hasPrefix("08") || state.hasPrefix("57P"): return .connectionLost
        default: return .other
        }
    }

    /// Serialization failures and deadlocks: running the whole transaction again can succeed.
    public var isRetryableTransactionFailure: Bool {
        kind == .serializationFailure || kind == .deadlockDetected
    }

    public var description: String {
        "Postgres \(kind) \(sqlState.map { "[\($0)] " } ?? "")\(message)"
    }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var result = self
        while result.last?.isNewline == true { result.removeLast() }
        return result
    }
}
