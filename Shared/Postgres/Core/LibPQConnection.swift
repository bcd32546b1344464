internal import CLibPQ
internal import HabitFlowCrypto

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// One libpq connection, in libpq's non-blocking mode.
///
/// Two ways to run a statement: the blocking calls (``execute(_:)``, ``executeScript(_:)``, connecting and `PQreset`),
/// which run on the pool's dedicated threads, and the non-blocking send (``sendPrepared(_:)``) plus
/// the connection's ``PostgresPoller`` collecting the answer, for a statement already prepared on this connection:
/// the common case, with no thread hop to send and a few poller threads waiting for every connection's answers.
///
/// - Important: only ever used by one thread at a time, and never blocking on an event-loop thread or the Swift
///   cooperative pool: ``PostgresPool`` hands a connection to exactly one lease holder, whose calls run one after
///   another (a send on the caller's thread, then the poller's collection, or a blocking call on the pool's threads;
///   the poller's own socket states decide which thread reads an answer, see ``PostgresPoller``).
///   That exclusive ownership, handed over through the pool's and the poller's locks, not a lock of its own, is what
///   makes the `@unchecked Sendable` below sound (libpq allows a connection to move between threads, not to be used by
///   two at once).
final class LibPQConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    /// The poller that collects this connection's non-blocking answers, for the connection's whole life.
    let poller = PostgresPollers.shared.pollerForNewConnection()
    /// The socket as added to the poller's epoll set; -1 until the first non-blocking statement, and again after
    /// `PQreset` or `close()`: a new socket, even one reusing the number, must be added anew.
    var registeredSocket: Int32 = -1
    /// Prepared statements by SQL text; one SQL text can be prepared with different parameter types.
    private var preparedStatements: [String: [PreparedStatement]] = [:]
    /// The statement ``sendPrepared(_:)`` sent, until ``receiveResult()`` has its answer.
    private var statementInFlight: PreparedStatement?
    /// The sent statement's result, held by ``receiveResult()`` until the command has ended (libpq returns no more
    /// results); replaced by an error result that comes after it.
    private var pendingResult: OpaquePointer?
    private var preparedStatementCount = 0
    /// When the connection last talked to the server; an idle connection gets a real round trip before reuse.
    private(set) var lastUsed = ContinuousClock.now

    /// Session settings, given as connection options so `PQreset` keeps them: the ones the text codecs rely on, and
    /// generic plans for every prepared statement. Postgres's default (`auto`) plans a statement anew on each call
    /// when it estimates the generic plan dearer than the custom ones, which it does for every `= ANY($1)` (the array's
    /// length is unknown): habits' batched week-view statements were planned on every call, at 3–5 times their
    /// execution time (Benchmarks/HISTORY.md, "Generic plans"). Our statements are written for their generic plans
    /// (`OFFSET 0` fences where the generic plan went wrong).
    static let sessionOptions =
        "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3"
        + " -c plan_cache_mode=force_generic_plan"

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
        // Sends never block (PQexec and friends still wait for their answer, whatever the mode).
        PQsetnonblocking(handle, 1)
        self.handle = handle
    }

    deinit { close() }

    /// Closes the connection. Idempotent.
    func close() {
        dropPendingResult()
        if let handle {
            PQfinish(handle)
            self.handle = nil
            registeredSocket = -1
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

    /// Does the lease's check where it cannot block: `true` when the connection is usable as it is, `false` when it
    /// needs a round trip or a reconnection (``prepareForUse(pingAfter:)`` on the pool's threads). The socket itself
    /// is looked at (one `poll`) only when the poller marked it: new to the poller, readable while idle (the server
    /// hung up or sent a notice), or after a failed statement; otherwise this costs no system call.
    func isReadyWithoutBlocking(pingAfter: Duration) -> Bool {
        guard checkBeforeNextUse else { return true }
        guard let handle, PQstatus(handle) == CONNECTION_OK, ContinuousClock.now - lastUsed <= pingAfter else {
            return false
        }
        if poller.mustCheckBeforeUse(self), !serverHasNotHungUp() { return false }
        checkBeforeNextUse = false
        return true
    }

    /// Makes sure the connection works before a caller uses it, reconnecting (`PQreset`) when the server closed it,
    /// for example after a restart. Connections idle longer than `pingAfter` also get a real round trip, which
    /// catches half-open TCP connections that reading the socket cannot.
    func ensureUsable(pingAfter: Duration) throws(PostgresError) {
        guard handle != nil else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        var healthy = serverHasNotHungUp()
        if healthy && ContinuousClock.now - lastUsed > pingAfter {
            healthy = ping()
        }
        if !healthy { try reset() }
    }

    /// Non-blocking: an idle connection has nothing to read unless the server hung up (restart, terminated backend:
    /// a FATAL message and EOF) or sent notifications. One zero-timeout poll tells which.
    private func serverHasNotHungUp() -> Bool {
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return false }
        let peerClosed = Int16(0x2000)  // POLLRDHUP (Linux): the peer shut down its side.
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN) | peerClosed, revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return true }
        let hungUp = descriptor.revents & (peerClosed | Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)) != 0
        return !hungUp && PQconsumeInput(handle) == 1 && PQstatus(handle) == CONNECTION_OK
    }

    private func ping() -> Bool {
        guard let handle, let result = PQexec(handle, "") else { return false }
        defer { PQclear(result) }
        return PQresultStatus(result) == PGRES_EMPTY_QUERY
    }

    /// Reconnects with the same parameters. Server-side state (prepared statements, session) is gone afterwards.
    func reset() throws(PostgresError) {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        forgetPreparedStatements()
        dropPendingResult()
        registeredSocket = -1
        PQreset(handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(kind: .connectionFailed, message: Self.errorMessage(handle))
        }
        PQsetnonblocking(handle, 1)
        lastUsed = .now
    }

    /// Runs one parameterized statement through a prepared statement cached on this connection.
    func execute(_ query: PostgresQuery) throws(PostgresError) -> PostgresRows {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        let statement = try preparedStatement(for: query, handle: handle)
        let result = try withParameterArrays(query.binds) { values, lengths, formats in
            statement.name.withUnsafeBufferPointer { name in
                PQexecPrepared(handle, name.baseAddress, Int32(query.binds.count), values, lengths, formats, 0)
            }
        }
        lastUsed = .now
        return try Self.rows(from: result, handle: handle, of: statement)
    }

    // MARK: - Non-blocking statements (driven by PostgresPoller)

    /// What a non-blocking send left to do.
    enum SendProgress {
        /// Everything is in the socket; wait for the answer.
        case sent
        /// Part of the request is still in libpq's buffer; wait until the socket is writable and ``flush()``.
        case needsFlush
    }

    /// Sends `query` without waiting, when its prepared statement exists on this connection; `nil` when it does not
    /// (preparing waits for the server, so the caller runs ``execute(_:)`` on the pool's threads instead).
    func sendPrepared(_ query: PostgresQuery) throws(PostgresError) -> SendProgress? {
        guard let handle else { throw PostgresError(kind: .connectionFailed, message: "connection is closed") }
        guard let statement = preparedStatement(for: query) else { return nil }
        let sent = try withParameterArrays(query.binds) { values, lengths, formats in
            statement.name.withUnsafeBufferPointer { name in
                PQsendQueryPrepared(handle, name.baseAddress, Int32(query.binds.count), values, lengths, formats, 0)
            }
        }
        guard sent == 1 else {
            throw PostgresError(
                kind: PQstatus(handle) == CONNECTION_OK ? .other : .connectionLost, message: Self.errorMessage(handle))
        }
        statementInFlight = statement
        return try flush()
    }

    /// Pushes what libpq still buffers of the request into the socket.
    func flush() throws(PostgresError) -> SendProgress {
        guard let handle else { throw PostgresError(kind: .connectionLost, message: "connection is closed") }
        switch PQflush(handle) {
        case 0: return .sent
        case 1: return .needsFlush
        default: throw PostgresError(kind: .connectionLost, message: Self.errorMessage(handle))
        }
    }

    /// Reads what the socket has; the statement's rows once the whole answer is in, `nil` while it is not.
    ///
    /// The whole answer ends with the server's ReadyForQuery, not with the statement's result: a statement outside a
    /// transaction block commits at the Sync that follows it, after its rows and CommandComplete were sent. A result
    /// counts only once libpq has no more to return; a failure before that (the commit's, or the connection lost while
    /// the commit waited for its WAL flush) fails the statement, so no write is reported done that was not committed.
    func receiveResult() throws(PostgresError) -> PostgresRows? {
        guard let handle else { throw PostgresError(kind: .connectionLost, message: "connection is closed") }
        guard PQconsumeInput(handle) == 1 else {
            dropPendingResult()
            throw PostgresError(kind: .connectionLost, message: Self.errorMessage(handle))
        }
        // PQgetResult would block while libpq is busy: wait for more input instead.
        while PQisBusy(handle) == 0 {
            guard let result = PQgetResult(handle) else {
                // The command ended: its result is final.
                lastUsed = .now
                let final = pendingResult
                pendingResult = nil
                defer { statementInFlight = nil }
                return try Self.rows(from: final, handle: handle, of: statementInFlight)
            }
            if pendingResult == nil || Self.isError(result) {
                PQclear(pendingResult)
                pendingResult = result
            } else {
                PQclear(result)
            }
        }
        return nil
    }

    /// Whether `result` reports a failure rather than rows or a completed command.
    private static func isError(_ result: OpaquePointer) -> Bool {
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY: false
        default: true
        }
    }

    private func dropPendingResult() {
        PQclear(pendingResult)
        pendingResult = nil
    }

    /// The socket the poller waits on (it changes when `PQreset` reconnects).
    var socket: Int32 { handle.map { PQsocket($0) } ?? -1 }

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

    /// A statement prepared on this connection. A class, so that its first answer can leave the result's columns
    /// here for all later ones.
    private final class PreparedStatement {
        let parameterTypes: [PostgresType]
        /// The name as a NUL-terminated C string, handed to libpq as it is: a `String` argument would be copied into
        /// a new C string on every call.
        let name: ContiguousArray<CChar>
        /// The result's columns, from the first answer. They cannot change afterwards: Postgres fails a prepared
        /// statement whose result would ("cached plan must not change result type").
        var columns: [PostgresColumn]?

        init(parameterTypes: [PostgresType], name: String) {
            self.parameterTypes = parameterTypes
            self.name = name.utf8CString
        }

        func matches(_ binds: [PostgresBind]) -> Bool {
            parameterTypes.count == binds.count && zip(parameterTypes, binds).allSatisfy { $0 == $1.type }
        }
    }

    /// The prepared statement for `query` on this connection, `nil` if it is not prepared yet. Looked up by the SQL
    /// text as it is, without building a key: this runs for every statement.
    private func preparedStatement(for query: PostgresQuery) -> PreparedStatement? {
        preparedStatements[query.sql]?.first { $0.matches(query.binds) }
    }

    private func forgetPreparedStatements() {
        preparedStatements.removeAll()
        preparedStatementCount = 0
    }

    private func preparedStatement(for query: PostgresQuery, handle: OpaquePointer) throws(PostgresError)
        -> PreparedStatement
    {
        if let statement = preparedStatement(for: query) { return statement }

        if preparedStatementCount >= Self.preparedStatementLimit {
            try executeScript("DEALLOCATE ALL")
            forgetPreparedStatements()
        }
        var key = query.sql
        for bind in query.binds { key += "\u{0}\(bind.type.rawValue)" }
        let digest = SHA256.hash(Array(key.utf8)).prefix(12)
        let name = "hf_" + digest.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        let types = query.binds.map { Oid($0.type.rawValue) }
        let result = types.withUnsafeBufferPointer { types in
            PQprepare(handle, name, query.sql, Int32(types.count), types.baseAddress)
        }
        _ = try Self.rows(from: result, handle: handle)
        let statement = PreparedStatement(parameterTypes: query.binds.map(\.type), name: name)
        preparedStatements[query.sql, default: []].append(statement)
        preparedStatementCount += 1
        return statement
    }

    // MARK: - Results

    /// Copies `result` out of libpq and frees it, or throws its error. The columns come from `statement` when its
    /// earlier answers left them there, else from the result (and are left there for the next answers).
    private static func rows(from result: OpaquePointer?, handle: OpaquePointer, of statement: PreparedStatement? = nil)
        throws(PostgresError) -> PostgresRows
    {
        guard let result else {
            throw PostgresError(
                kind: PQstatus(handle) == CONNECTION_OK ? .other : .connectionLost, message: errorMessage(handle))
        }
        defer { PQclear(result) }
        if isError(result) { throw PostgresError(result: result, connection: handle) }
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        let columns: [PostgresColumn]
        if let known = statement?.columns, known.count == columnCount, Self.result(result, hasTypesOf: known) {
            columns = known
        } else {
            columns = (0..<columnCount).map { column in
                PostgresColumn(
                    name: String(cString: PQfname(result, Int32(column))),
                    type: PostgresType(rawValue: UInt32(PQftype(result, Int32(column)))))
            }
            statement?.columns = columns
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
        let affected = Self.affectedRows(PQcmdTuples(result))
        return PostgresRows(columns: columns, affectedRows: affected, bytes: bytes, cells: cells)
    }

    /// Whether `result`'s columns, as many as `columns`, have their types (a cheap guard: Postgres does not let a
    /// prepared statement's result change).
    private static func result(_ result: OpaquePointer, hasTypesOf columns: [PostgresColumn]) -> Bool {
        for (index, column) in columns.enumerated() where column.type.rawValue != UInt32(PQftype(result, Int32(index))) {
            return false
        }
        return true
    }

    /// `PQcmdTuples`' decimal digits (empty for statements without a count), read without making a `String`.
    private static func affectedRows(_ digits: UnsafePointer<CChar>?) -> Int {
        guard var digit = digits else { return 0 }
        var value = 0
        while digit.pointee >= 0x30 && digit.pointee <= 0x39 {
            value = value &* 10 &+ Int(digit.pointee - 0x30)
            digit += 1
        }
        return value
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
/// The arrays are temporary allocations (on the stack when small), not arrays: this runs for every statement.
private func withParameterArrays<Result>(
    _ binds: [PostgresBind],
    _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> Result
) throws(PostgresError) -> Result {
    var byteCount = 0
    for (index, bind) in binds.enumerated() {
        guard let bytes = bind.bytes else { continue }
        if bind.format == .text && bytes.contains(0) {
            throw PostgresError(kind: .invalidParameter, message: "parameter $\(index + 1) contains a NUL character")
        }
        byteCount += bytes.count + 1
    }
    let count = binds.count
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(byteCount, 1)) { buffer in
        withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(count, 1)) { values in
            // Lengths first, then formats.
            withUnsafeTemporaryAllocation(of: Int32.self, capacity: max(2 * count, 1)) { integers in
                var offset = 0
                for (index, bind) in binds.enumerated() {
                    integers[count + index] = bind.format.rawValue
                    guard let bytes = bind.bytes else {
                        values[index] = nil
                        integers[index] = 0
                        continue
                    }
                    let start = buffer.baseAddress! + offset
                    bytes.withUnsafeBufferPointer { bytes in
                        if let source = bytes.baseAddress { start.update(from: source, count: bytes.count) }
                    }
                    start[bytes.count] = 0
                    values[index] = UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self)
                    integers[index] = Int32(bytes.count)
                    offset += bytes.count + 1
                }
                return body(
                    UnsafePointer(values.baseAddress), UnsafePointer(integers.baseAddress),
                    UnsafePointer(integers.baseAddress! + count))
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
