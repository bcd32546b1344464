public import Logging
internal import HabitFlowCrypto
internal import NIOPosix
internal import HabitFlowLocking

/// A bounded pool of Postgres connections with an async API.
///
/// Thread model: a statement whose prepared statement already exists on the connection (nearly all of them) is sent
/// with libpq's non-blocking API from the calling task's thread, and the answer is collected by the epoll thread of
/// the ``PostgresPoller`` the connection is bound to (one poller per core, at least two, shared by all pools; each
/// connection is bound to one of them round robin when it opens). The calling task then continues on its preferred
/// executor (an event loop, for the services' handlers), on the global executor when it has none, or, when it
/// prefers ``taskExecutor``, on that poller's thread itself, with no thread hand-off at all. Everything that waits
/// for the server by nature — connecting, `PQreset`, preparing a statement the first time on a connection, scripts —
/// runs libpq's blocking API on a dedicated `NIOThreadPool` with one thread per connection slot, so nothing ever
/// blocks a SwiftNIO event loop, the Swift cooperative pool or a poller. A connection is leased to one task at a time
/// and its calls run one after another, so each libpq connection is used by a single thread at any moment. (The
/// first version ran every statement on the blocking threads: a thread hop each way per statement and 32 threads on
/// 2 cores; Benchmarks/postgres.sh measured it at half of pgbench's rate. The wake-up of the waiting task's thread
/// that remains without ``taskExecutor`` costs about as much CPU as the rest of the client's work per statement.)
///
/// Recovery: before the first statement of each lease a connection checks, without blocking, whether the server
/// hung up while it was idle (its poller notes an idle socket that became readable, so the check costs a `poll` only
/// then); a connection the server closed (restart, idle timeout, `pg_terminate_backend`) is re-opened with `PQreset`
/// on the pool's threads, and its new socket is added to its poller's epoll set on the next statement. One idle
/// longer than ``Configuration/pingIdleConnectionsAfter`` gets a round trip first. A statement that was running when
/// the connection broke throws ``PostgresError/Kind/connectionLost``.
///
/// - Important: call ``shutdown()`` before dropping the pool; it stops the pool's threads.
public final class PostgresPool: PostgresQueryable, Sendable {
    public struct Configuration: Sendable {
        /// A libpq connection string or `postgresql://` URL.
        public var connectionString: String
        /// At most this many connections (and threads). Default 10.
        public var maximumConnections: Int = 10
        /// How long an acquire waits for a free connection before failing with ``PostgresError/Kind/poolTimeout``.
        /// Default 10 s.
        public var acquireTimeout: Duration = .seconds(10)
        /// An idle connection older than this gets a round trip before it is reused. Default 30 s.
        public var pingIdleConnectionsAfter: Duration = .seconds(30)

        public init(connectionString: String) {
            self.connectionString = connectionString
        }
    }

    public let configuration: Configuration
    let logger: Logger
    private let threads: NIOThreadPool
    private let state: Locked<State>

    public init(configuration: Configuration, logger: Logger) {
        precondition(configuration.maximumConnections > 0, "a pool needs at least one connection")
        self.configuration = configuration
        self.logger = logger
        self.threads = NIOThreadPool(numberOfThreads: configuration.maximumConnections)
        self.state = Locked(State(maximumConnections: configuration.maximumConnections))
        threads.start()
    }

    /// Closes every connection and stops the pool's threads. Waiting and later acquires fail with
    /// ``PostgresError/Kind/poolClosed``; connections in use close when they are returned.
    public func shutdown() async {
        let (idle, waiters, expiryTimer) = state.withLock { $0.close() }
        expiryTimer?.cancel()
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError(kind: .poolClosed, message: "the pool was shut down"))
        }
        if !idle.isEmpty {
            _ = try? await runBlocking { () throws(PostgresError) in idle.forEach { $0.close() } }
        }
        try? await threads.shutdownGracefully()
    }

    /// The executor of the poller threads that read the statements' answers (shared by all pools). A task whose work
    /// is mostly statements, and that has no event loop of its own to stay on, can prefer it
    /// (`Task(executorPreference: pool.taskExecutor)`, `withTaskExecutorPreference`): after each answer it continues
    /// on the poller thread that read it and sends its next statement from there, instead of waking another thread
    /// for each statement (Benchmarks/postgres.sh: about half the client CPU per statement). So a task runs on the
    /// poller of the connection it used last; where it starts, and where it goes after blocking work on the pool's
    /// threads, is any poller (round robin) until its next answer.
    ///
    /// - Important: code running there must not block (no blocking I/O, locks held for long, or heavy computation):
    ///   it delays the answers of every connection bound to that poller, whatever their pool. The pool's own blocking
    ///   work (connecting, preparing, scripts) still runs on the pool's threads.
    public var taskExecutor: any TaskExecutor { PostgresPollers.shared }

    // MARK: - Leasing connections

    /// Leases a connection for the duration of `body` (several statements on one session, such as `LISTEN` or a
    /// session advisory lock). Prefer ``transaction(isolation:_:)`` for writes.
    @discardableResult
    public func withConnection<Result>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        let connection = try await acquire()
        let lease = PostgresConnection(pool: self, connection: connection)
        do {
            let result = try await body(lease)
            await release(connection)
            return result
        } catch {
            await release(connection)
            throw error
        }
    }

    /// Runs one statement on a leased connection.
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try Task.checkCancellation()
        let connection = try await acquire()
        do {
            let rows = try await run(query, on: connection)
            await release(connection)
            return rows
        } catch {
            await release(connection)
            throw error
        }
    }

    enum Grant: Sendable {
        case connection(LibPQConnection)
        case openNew
    }

    struct Waiter {
        var id: Int
        var continuation: CheckedContinuation<Grant, any Error>
        /// When it fails with ``PostgresError/Kind/poolTimeout`` if nothing was granted by then.
        var deadline: ContinuousClock.Instant
    }

    /// The pool's bookkeeping. Only touched under `state`'s lock; continuations are resumed after unlocking.
    struct State {
        let maximumConnections: Int
        var idle: [LibPQConnection] = []
        /// Open connections plus those being opened.
        var connectionCount = 0
        var waiters: [Waiter] = []
        var nextWaiterID = 0
        var isClosed = false
        /// One timer for all waiters, due at the earliest deadline (see ``PostgresPool/armExpiryTimer(_:)``).
        var expiryTimer: Task<Void, Never>?

        init(maximumConnections: Int) { self.maximumConnections = maximumConnections }

        /// A connection now, permission to open one, or `nil`: wait.
        mutating func grantImmediately() -> Result<Grant, PostgresError>? {
            if isClosed { return .failure(PostgresError(kind: .poolClosed, message: "the pool was shut down")) }
            if let connection = idle.popLast() { return .success(.connection(connection)) }
            if connectionCount < maximumConnections {
                connectionCount += 1
                return .success(.openNew)
            }
            return nil
        }

        /// A returned connection goes to the longest waiter, or back to the idle list.
        mutating func returned(_ connection: LibPQConnection) -> (Waiter, Grant)? {
            if isClosed {
                connectionCount -= 1
                return nil
            }
            if !waiters.isEmpty { return (waiters.removeFirst(), .connection(connection)) }
            idle.append(connection)
            return nil
        }

        /// A slot freed by a failed open goes to the longest waiter as permission to try again.
        mutating func slotFreed() -> Waiter? {
            if !waiters.isEmpty, !isClosed { return waiters.removeFirst() }
            connectionCount -= 1
            return nil
        }

        mutating func removeWaiter(_ id: Int) -> Waiter? {
            guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return waiters.remove(at: index)
        }

        /// Removes the waiters whose deadline has passed; the earliest deadline left, if any, is when to look again.
        mutating func expiredWaiters(at now: ContinuousClock.Instant) -> (expired: [Waiter], next: ContinuousClock.Instant?) {
            let expired = waiters.filter { $0.deadline <= now }
            if !expired.isEmpty { waiters.removeAll { $0.deadline <= now } }
            return (expired, waiters.lazy.map(\.deadline).min())
        }

        mutating func close() -> ([LibPQConnection], [Waiter], Task<Void, Never>?) {
            isClosed = true
            let idle = self.idle
            connectionCount -= idle.count
            self.idle.removeAll()
            let waiters = self.waiters
            self.waiters.removeAll()
            defer { expiryTimer = nil }
            return (idle, waiters, expiryTimer)
        }
    }

    func acquire() async throws -> LibPQConnection {
        // Fast path, no continuation: an idle connection or a free slot.
        let (immediate, waiterID) = state.withLock { state -> (Result<Grant, PostgresError>?, Int) in
            if let grant = state.grantImmediately() { return (grant, 0) }
            state.nextWaiterID += 1
            return (nil, state.nextWaiterID)
        }
        let grant: Grant
        if let immediate {
            grant = try immediate.get()
        } else {
            grant = try await waitForGrant(waiterID)
        }
        return try await connection(for: grant)
    }

    private func waitForGrant(_ waiterID: Int) async throws -> Grant {
        let deadline = ContinuousClock.now + configuration.acquireTimeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                let immediate = state.withLock { state -> Result<Grant, PostgresError>? in
                    if let grant = state.grantImmediately() { return grant }
                    state.waiters.append(Waiter(id: waiterID, continuation: continuation, deadline: deadline))
                    if state.expiryTimer == nil { armExpiryTimer(&state, at: deadline) }
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            failWaiter(waiterID, CancellationError())
        }
    }

    /// Starts the one timer that fails waiters past their deadline. One per pool rather than one per waiter: under
    /// load most acquires wait briefly, and a sleeping task per wait (created, scheduled on the global executor,
    /// cancelled) cost the habits service about a tenth of its CPU at 32 calls in flight (perf, week view).
    private func armExpiryTimer(_ state: inout State, at deadline: ContinuousClock.Instant) {
        state.expiryTimer = Task { [weak self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            guard !Task.isCancelled else { return }
            self?.expireWaiters()
        }
    }

    private func expireWaiters() {
        let expired = state.withLock { state in
            let (expired, next) = state.expiredWaiters(at: .now)
            if let next, !state.isClosed {
                armExpiryTimer(&state, at: next)
            } else {
                state.expiryTimer = nil
            }
            return expired
        }
        let timeout = configuration.acquireTimeout
        for waiter in expired {
            waiter.continuation.resume(
                throwing: PostgresError(kind: .poolTimeout, message: "no connection became free within \(timeout)"))
        }
    }

    private func connection(for grant: Grant) async throws -> LibPQConnection {
        switch grant {
        case .connection(let connection):
            connection.checkBeforeNextUse = true
            return connection
        case .openNew:
            let connectionString = configuration.connectionString
            do {
                let connection = try await runBlocking { () throws(PostgresError) in
                    try LibPQConnection(connectionString: connectionString)
                }
                logger.debug("opened a Postgres connection")
                return connection
            } catch {
                logger.warning("could not open a Postgres connection", metadata: ["error": "\(error)"])
                if let waiter = state.withLock({ $0.slotFreed() }) {
                    waiter.continuation.resume(returning: .openNew)
                }
                throw error
            }
        }
    }

    private func failWaiter(_ id: Int, _ error: any Error) {
        guard let waiter = state.withLock({ $0.removeWaiter(id) }) else { return }
        waiter.continuation.resume(throwing: error)
    }

    /// Returns a connection. One left inside a transaction (its task was cancelled mid-way) is rolled back first.
    func release(_ connection: LibPQConnection) async {
        if connection.isInTransaction {
            _ = try? await runBlocking { () throws(PostgresError) in try connection.executeScript("ROLLBACK") }
        }
        let (handOff, isClosed) = state.withLock { state in (state.returned(connection), state.isClosed) }
        if let (waiter, grant) = handOff {
            waiter.continuation.resume(returning: grant)
        } else if isClosed {
            connection.close()
        }
    }

    /// Runs one statement: sent from the calling thread and collected by the connection's poller when the connection
    /// needs no blocking check and has the statement prepared (the common case), else on the pool's threads.
    func run(_ query: PostgresQuery, on connection: LibPQConnection) async throws -> PostgresRows {
        let ping = configuration.pingIdleConnectionsAfter
        if connection.isReadyWithoutBlocking(pingAfter: ping),
            let rows = try await connection.poller.run(query, on: connection)
        {
            return rows
        }
        return try await runBlocking { () throws(PostgresError) in
            try connection.prepareForUse(pingAfter: ping)
            return try connection.execute(query)
        }
    }

    /// Runs blocking libpq work on the pool's threads. Not cancelled once submitted: a COMMIT or ROLLBACK always
    /// runs, and a connection is never left half-way through a call.
    func runBlocking<Value: Sendable>(_ body: @escaping @Sendable () throws(PostgresError) -> Value)
        async throws(PostgresError) -> Value
    {
        let result: Result<Value, PostgresError> = await withCheckedContinuation { continuation in
            threads.submit { state in
                guard case .active = state else {
                    continuation.resume(returning: .failure(PostgresError(kind: .poolClosed, message: "the pool was shut down")))
                    return
                }
                continuation.resume(returning: Result { () throws(PostgresError) -> Value in try body() })
            }
        }
        return try result.get()
    }
}

/// A connection leased from a ``PostgresPool`` for the duration of a closure. Do not let it escape the closure.
public struct PostgresConnection: PostgresQueryable {
    let pool: PostgresPool
    let connection: LibPQConnection

    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try Task.checkCancellation()
        return try await pool.run(query, on: connection)
    }

    /// Runs a script of statements without parameters (simple query protocol), such as a migration file.
    ///
    /// - Important: only for SQL that never contains request data.
    public func executeScript(_ sql: String) async throws {
        let connection = self.connection
        let ping = pool.configuration.pingIdleConnectionsAfter
        try await pool.runBlocking { () throws(PostgresError) in
            try connection.prepareForUse(pingAfter: ping)
            try connection.executeScript(sql)
        }
    }

    /// Releases a session-level advisory lock, also when the calling task is cancelled: a lock left behind on a
    /// pooled connection would outlive its holder and block everyone else.
    public func releaseAdvisoryLock(_ key: Int64) async throws {
        let connection = self.connection
        let ping = pool.configuration.pingIdleConnectionsAfter
        _ = try await pool.runBlocking { () throws(PostgresError) in
            try connection.prepareForUse(pingAfter: ping)
            return try connection.execute("SELECT pg_advisory_unlock(\(key))").count
        }
    }

    /// The server version, for example `150018` for 15.18.
    public var serverVersion: Int { connection.serverVersion }

    /// The advisory lock key for a lock `name` (the first 8 bytes of its SHA-256): the same name gives the same key in
    /// every process.
    public static func advisoryLockKey(named name: String) -> Int64 {
        SHA256.hash(Array(name.utf8)).prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}

/// Something statements can run on: the pool (one lease per statement), a leased connection or a transaction.
/// Write data-access code against `some PostgresQueryable` so it runs inside or outside a transaction alike.
public protocol PostgresQueryable {
    func query(_ query: PostgresQuery) async throws -> PostgresRows
}

/// A lease belongs to one task: sharing it would run two statements on one libpq connection at once.
@available(*, unavailable)
extension PostgresConnection: Sendable {}

extension PostgresQueryable {
    /// Runs a statement and returns how many rows it touched.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query).affectedRows
    }

    /// Runs a statement that returns at most one row.
    public func queryRow(_ query: PostgresQuery) async throws -> PostgresRow? {
        try await self.query(query).singleRow()
    }
}
