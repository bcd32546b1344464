internal import CLibPQ
internal import HabitFlowCrypto

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// One libpq connection. Every call blocks the calling thread.
///
/// - Important: only ever used by one thread at a time, and never on an event-loop thread or the Swift
///   cooperative pool: ``PostgresPool`` hands a connection to exactly one lease holder and runs its calls on the
///   pool's dedicated threads. That exclusive ownership, not a lock, is what makes the `@unchecked Sendable` below
///   sound (libpq allows a connection to move between threads, not to be used by two at once).
final class BlockingConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    /// Prepared statement names by statement key (SQL + parameter types).
    private var preparedStatements: [String: String] = [:]
    /// When the connection last talked to the server; an idle connection gets a real round trip before reuse.
    private(set) var lastUsed = ContinuousClock.now

    /// Session settings the text codecs rely on. Given as connection options so `PQreset` keeps them.
    static let sessionOptions = "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3"

    /// Opens a connection described by a libpq connection string or `postgresql://` URL.
    init(connectionString: String) throws(PostgresError) {
        // Keywords before `dbname` are defaults the URL may override; those after it are forced.
        let keywords = ["connect_timeout", "dbname", "options", "client_encoding"]
        let values = ["10", connectionString, Self.sessionOptions, "UTF8"]
        let handle = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let handle else {
            throw PostgresError(kind: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.errorMessage(handle)
            PQfinish(handle)
            throw PostgresError(kind: .connectionFailed, message: message)
        }
        // Notices (for example "relation already exists, skipping") would go to stderr unstructured; drop them.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        self.handle = handle
    }

    deinit { close() }

    /// Closes the connection. Idempotent.
    func close() {
        if let handle {
            PQfinish(handle)
            self.handle = nil
        }
    }

    var serverVersion: Int { handle.map { Int(PQserverVersion($0)) } ?? 0 }

    var isInTransaction: Bool {
        guard let handle else { return false }
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Set when the pool hands the connection out; the lease's first statement then runs ``ensureUsable(pingAfter:)``.
    /// Only the first: a reconnection in the middle of a lease would silently drop its transaction or session
    /// state (advisory locks, LISTEN), so later statements on a broken connection fail instead.
    var checkBeforeNextUse = true

    func prepareForUse(pingAfter: Duration) throws(PostgresError) {
        guard checkBeforeNextUse else { return }
        checkBeforeNextUse = false
        try ensureUsable(pingAfter: pingAfter)
    }

    /// Makes sure the connection works before a caller uses it, reconnecting (`PQreset`) when the server closed it,
    /// for example after a restart. Connections idle longer than `pingAfter` also get a real round trip, which
    /// catches half-open TCP connections that reading the socket cannot.
    func ensureUsable(pingAfter: Duration) throws(PostgresError) {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        // Non-blocking: an idle connection has nothing to read unless the server hung up (restart, terminated
        // backend: a FATAL message and EOF) or sent notifications. One zero-timeout poll tells which.
        var healthy = PQstatus(handle) == CONNECTION_OK
        if healthy {
            let peerClosed = Int16(0x2000)  // POLLRDHUP (Linux): the peer shut down its side.
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN) | peerClosed, revents: 0)
            if poll(&descriptor, 1, 0) > 0 {
                let hungUp = descriptor.revents & (peerClosed | Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)) != 0
                healthy = !hungUp && PQconsumeInput(handle) == 1 && PQstatus(handle) == CONNECTION_OK
            }
        }
        if healthy && ContinuousClock.now - lastUsed > pingAfter {
            healthy = ping()
        }
        if !healthy { try reset() }
    }

    private func ping() -> Bool {
        guard let handle, let result = PQexec(handle, "") else { return false }
        defer { PQclear(result) }
        return PQresultStatus(result) == PGRES_EMPTY_QUERY
    }

    /// Reconnects with the same parameters. Server-side state (prepared statements, session) is gone afterwards.
    func reset() throws(PostgresError) {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        preparedStatements.removeAll()
        PQreset(handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(kind: .connectionFailed, message: Self.errorMessage(handle))
        }
        lastUsed = .now
    }

    /// Runs one parameterized statement through a prepared statement cached on this connection.
    func execute(_ query: PostgresQuery) throws(PostgresError) -> PostgresRows {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        let name = try preparedStatementName(for: query, handle: handle)
        let result = try withParameterArrays(query.binds) { values, lengths, formats in
            PQexecPrepared(handle, name, Int32(query.binds.count), values, lengths, formats, 0)
        }
        lastUsed = .now
        return try Self.rows(from: result, handle: handle)
    }

    /// Runs a script of one or more statements without parameters (simple query protocol).
    ///
    /// - Important: only for SQL that never contains request data: migration files and fixed statements.
    func executeScript(_ sql: String) throws(PostgresError) {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        let result = PQexec(handle, sql)
        lastUsed = .now
        _ = try Self.rows(from: result, handle: handle)
    }

    /// Reads notifications (LISTEN) that arrived, without blocking.
    func receiveNotifications() throws(PostgresError) -> [PostgresNotification] {
        guard let handle, PQconsumeInput(handle) == 1 else {
            throw PostgresError(kind: .connectionLost, message: handle.map(Self.errorMessage) ?? "connection is closed")
        }
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(handle) {
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    senderProcessID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        lastUsed = .now
        return notifications
    }

    /// Waits up to `timeoutMilliseconds` for the server to send something (notifications, or EOF).
    func waitForInput(timeoutMilliseconds: Int32) -> Bool {
        guard let handle else { return false }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, timeoutMilliseconds) > 0
    }

    /// Quotes an identifier (for `LISTEN`, which takes no parameters).
    func quotedIdentifier(_ identifier: String) throws(PostgresError) -> String {
        guard let handle, let quoted = PQescapeIdentifier(handle, identifier, identifier.utf8.count) else {
            throw PostgresError(kind: .invalidParameter, message: "cannot quote identifier")
        }
        defer { PQfreemem(quoted) }
        return String(cString: quoted)
    }

    // MARK: - Prepared statements

    /// A connection keeps at most this many; past it, all are dropped and re-prepared on use.
    private static let preparedStatementLimit = 1000

    private func preparedStatementName(for query: PostgresQuery, handle: OpaquePointer) throws(PostgresError) -> String {
        var key = query.sql
        for bind in query.binds { key += "\u{0}\(bind.type.rawValue)" }
        if let name = preparedStatements[key] { return name }

        if preparedStatements.count >= Self.preparedStatementLimit {
            try executeScript("DEALLOCATE ALL")
            preparedStatements.removeAll()
        }
        let digest = SHA256.hash(Array(key.utf8)).prefix(12)
        let name = "hf_" + digest.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        let types = query.binds.map { Oid($0.type.rawValue) }
        let result = types.withUnsafeBufferPointer { types in
            PQprepare(handle, name, query.sql, Int32(types.count), types.baseAddress)
        }
        _ = try Self.rows(from: result, handle: handle)
        preparedStatements[key] = name
        return name
    }

    // MARK: - Results

    private static func rows(from result: OpaquePointer?, handle: OpaquePointer) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(
                kind: PQstatus(handle) == CONNECTION_OK ? .other : .connectionLost, message: errorMessage(handle))
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            break
        default:
            throw PostgresError(result: result, connection: handle)
        }
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        let columns = (0..<columnCount).map { column in
            PostgresColumn(
                name: String(cString: PQfname(result, Int32(column))),
                type: PostgresType(rawValue: UInt32(PQftype(result, Int32(column)))))
        }
        var bytes: [UInt8] = []
        var cells: [Range<Int>?] = []
        cells.reserveCapacity(rowCount * columnCount)
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                if PQgetisnull(result, row, column) == 1 {
                    cells.append(nil)
                    continue
                }
                let length = Int(PQgetlength(result, row, column))
                let start = bytes.count
                PQgetvalue(result, row, column).withMemoryRebound(to: UInt8.self, capacity: length) { value in
                    bytes.append(contentsOf: UnsafeBufferPointer(start: value, count: length))
                }
                cells.append(start..<start + length)
            }
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return PostgresRows(columns: columns, affectedRows: affected, bytes: bytes, cells: cells)
    }

    private static func errorMessage(_ handle: OpaquePointer) -> String {
        String(cString: PQerrorMessage(handle)).trimmingTrailingNewlines()
    }
}

/// A message from `NOTIFY` on a channel this session listens on.
public struct PostgresNotification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    public var senderProcessID: Int32
}

/// Lays the parameters out in one buffer and calls `body` with libpq's value, length and format arrays.
/// Text values are NUL-terminated (libpq ignores lengths for text), so a NUL inside text cannot be sent.
private func withParameterArrays<Result>(
    _ binds: [PostgresBind],
    _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> Result
) throws(PostgresError) -> Result {
    var buffer: [UInt8] = []
    var offsets: [Int?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    for (index, bind) in binds.enumerated() {
        formats.append(bind.format.rawValue)
        guard let bytes = bind.bytes else {
            offsets.append(nil)
            lengths.append(0)
            continue
        }
        if bind.format == .text && bytes.contains(0) {
            throw PostgresError(kind: .invalidParameter, message: "parameter $\(index + 1) contains a NUL character")
        }
        offsets.append(buffer.count)
        lengths.append(Int32(bytes.count))
        buffer.append(contentsOf: bytes)
        buffer.append(0)
    }
    if buffer.isEmpty { buffer.append(0) }
    return buffer.withUnsafeBufferPointer { buffer in
        let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
        let values: [UnsafePointer<CChar>?] = offsets.map { $0.map { base + $0 } }
        return values.withUnsafeBufferPointer { values in
            lengths.withUnsafeBufferPointer { lengths in
                formats.withUnsafeBufferPointer { formats in
                    body(values.baseAddress, lengths.baseAddress, formats.baseAddress)
                }
            }
        }
    }
}

/// Calls `body` with a C array of C strings that lives for the duration of the call.
private func withCStringArray<Result>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Result)
    -> Result
{
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
