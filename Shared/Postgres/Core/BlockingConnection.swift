internal import CLibPQ

/// One libpq connection to Postgres.
///
/// - Important: libpq calls block the calling thread and a connection must not be used from two threads at once:
///   a connection has exactly one owner, and is never used on an event-loop thread. (It is therefore not `Sendable`.)
public final class PostgresConnection {
    private var connection: OpaquePointer?

    /// Opens a connection described by a libpq connection string or `postgresql://` URL.
    public init(_ connectionString: String) throws(PostgresError) {
        let connection = PQconnectdb(connectionString)
        guard let connection else {
            throw PostgresError(kind: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.errorMessage(connection)
            PQfinish(connection)
            throw PostgresError(kind: .connectionFailed, message: message)
        }
        self.connection = connection
    }

    deinit { close() }

    /// Closes the connection. Idempotent.
    public func close() {
        if let connection {
            PQfinish(connection)
            self.connection = nil
        }
    }

    /// The server's version number, for example `150018` for 15.18.
    public var serverVersion: Int {
        guard let connection else { return 0 }
        return Int(PQserverVersion(connection))
    }

    /// Runs one parameterized statement (`$1`, `$2`, ...; parameters in text format, `nil` is SQL NULL) and returns
    /// its rows as text. Values never become part of the SQL text.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        guard let connection else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        let result = withCStringArray(parameters) { values in
            PQexecParams(connection, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        guard let result else { throw PostgresError(kind: .connectionFailed, message: Self.errorMessage(connection)) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
            return PostgresRows(result)
        default:
            throw PostgresError(result: result, connection: connection)
        }
    }

    private static func errorMessage(_ connection: OpaquePointer) -> String {
        String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines()
    }
}

/// The rows of a result, decoded as text (NULL is `nil`).
public struct PostgresRows: Sendable {
    public let columns: [String]
    public let rows: [[String?]]
    /// For INSERT/UPDATE/DELETE: how many rows the statement touched.
    public let affectedRows: Int

    init(_ result: OpaquePointer) {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        rows = (0..<rowCount).map { row in
            (0..<columnCount).map { column in
                PQgetisnull(result, Int32(row), Int32(column)) == 1
                    ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
            }
        }
        affectedRows = Int(String(cString: PQcmdTuples(result))) ?? 0
    }
}

/// Calls `body` with a C array of C strings (NULL entries for `nil`) that lives for the duration of the call.
private func withCStringArray<Result>(
    _ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> Result
) -> Result {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0)! } }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var result = self
        while result.last?.isNewline == true { result.removeLast() }
        return result
    }
}

#if canImport(Glibc)
private import Glibc
#endif
