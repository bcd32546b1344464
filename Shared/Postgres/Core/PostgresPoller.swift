internal import CLibPQ
internal import Foundation
internal import HabitFlowLocking
internal import NIOCore
internal import Synchronization

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The poller threads that every pool shares, and the `TaskExecutor` that runs tasks on them
/// (``PostgresPool/taskExecutor``).
///
/// Each ``PostgresPoller`` has its own thread, epoll set and job queue; a connection is bound to one of them for its
/// whole life (round robin as connections open), so its answers are always read by the same thread. As an executor,
/// the group runs a job on the poller whose thread enqueues it: a task resumed by a poller after its answer was read
/// continues right there, and sends its next statement from there, with no thread wake-up. A task thereby follows
/// its connections: it runs on the poller that read its last answer. Jobs enqueued from any other thread (a task's
/// start, the end of blocking work on a pool's threads) go to the pollers round robin.
///
/// Why several: one thread sending and collecting for 32 connections left backends waiting between its turns
/// (Benchmarks/postgres.sh at concurrency 32: 0.61 of pgbench's select rate with 0.4 of a core idle), where pgbench's
/// two threads each drive 16. One poller per core (at least two) lets the pollers work in parallel.
final class PostgresPollers: TaskExecutor, Sendable {
    /// All pools share the pollers; their threads live as long as the process, like SwiftNIO's singleton loops.
    static let shared = PostgresPollers(count: max(2, System.coreCount))

    let pollers: [PostgresPoller]
    private let nextConnectionPoller = Atomic<Int>(0)
    private let nextJobPoller = Atomic<Int>(0)

    private init(count: Int) {
        pollers = (0..<count).map { PostgresPoller(index: $0) }
        for poller in pollers { poller.start(runningJobsFor: self) }
    }

    /// The poller a new connection is bound to: round robin, so each poller drives an equal share of the connections.
    func pollerForNewConnection() -> PostgresPoller {
        pollers[nextConnectionPoller.wrappingAdd(1, ordering: .relaxed).oldValue % pollers.count]
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // Usually a poller resuming a task whose answer it just read: it stays on that poller.
        for poller in pollers where poller.isCurrentThread {
            poller.enqueue(job)
            return
        }
        pollers[nextJobPoller.wrappingAdd(1, ordering: .relaxed).oldValue % pollers.count].enqueue(job)
    }
}

/// One thread that waits, with epoll, for the answers of the statements its connections sent with libpq's
/// non-blocking API, and resumes each waiting task when its answer is complete; between two waits it runs the jobs of
/// the tasks that prefer ``PostgresPollers`` and were resumed here (they send their next statements before the
/// thread blocks again), so all ready answers are collected and all ready statements sent per turn.
///
/// Why: a thread blocked in `PQexecPrepared` per connection costs two thread wake-ups per statement (hand the work to
/// the thread, hand the result back) and, at 32 connections on 2 cores, constant context switching. Here the caller
/// sends on its own thread and the poller collects answers for all of its connections, usually several per wake-up —
/// the way pgbench drives its connections. A task without a preference for ``PostgresPollers`` still pays one
/// wake-up per statement (its continuation goes to its own executor).
///
/// A connection's socket joins the epoll set on its first non-blocking statement and stays there, edge-triggered,
/// until the socket closes (`PQreset` or the connection's end): a statement costs its send and its read, and no
/// `epoll_ctl` to re-arm (EPOLLONESHOT did, one more system call per statement). Edge-triggered readiness is reported
/// once, so the state of each socket's statement (`Statement`) decides who reads: the poller when the task waits,
/// or the thread still sending or reading when the event comes meanwhile (it reads once more). Readiness with no
/// statement running (the server hung up, or sent a notice, while the connection sat idle) marks the socket, and only
/// a marked socket costs the next lease a `poll` (``LibPQConnection/isReadyWithoutBlocking(pingAfter:)``).
///
/// - Important: only non-blocking work runs on this thread. Blocking libpq calls go to the pool's threads, whatever
///   executor the calling task prefers.
final class PostgresPoller: Sendable {
    private struct Waiter {
        var connection: LibPQConnection
        var continuation: UnsafeContinuation<PostgresRows, any Error>
        /// Part of the request is still in libpq's buffer: flush before reading.
        var needsFlush: Bool
    }

    /// Where the statement on a socket is.
    private enum Statement {
        /// A thread is sending it or reading its answer. Readiness reported meanwhile is remembered in `readyAgain`,
        /// for that thread to read once more: edge-triggered epoll reports it only once.
        case busy(readyAgain: Bool)
        /// Sent; the next readiness event hands the waiter to the poller thread.
        case waiting(Waiter)
    }

    private struct Sockets {
        var statements: [Int32: Statement] = [:]
        /// Registered sockets that became readable with no statement running (the server hung up, or sent a notice)
        /// or whose last statement failed: the next lease checks them (``LibPQConnection/isReadyWithoutBlocking``).
        var toCheck: Set<Int32> = []
    }

    /// Jobs of tasks that prefer the pollers, run between two epoll waits.
    private struct JobQueue {
        var jobs: [UnownedJob] = []
        /// The thread is (about to be) blocked in `epoll_wait`: an enqueue from another thread must wake it.
        var sleeping = false
    }

    /// Its place among ``PostgresPollers/pollers``, in the thread's name.
    let index: Int
    private let epoll: Int32
    /// An eventfd in the epoll set: written to wake the thread for jobs enqueued from other threads.
    private let wakeUp: Int32
    private let sockets = Locked(Sockets())
    private let queue = Locked(JobQueue())
    /// The thread's `pthread_self()`, 0 until it runs: tells whether a caller runs on this poller's thread.
    private let threadID = Atomic<UInt>(0)

    fileprivate init(index: Int) {
        self.index = index
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: errno \(errno)")
        wakeUp = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(wakeUp >= 0, "eventfd failed: errno \(errno)")
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeUp
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, wakeUp, &event) == 0, "epoll_ctl failed: errno \(errno)")
    }

    fileprivate func start(runningJobsFor executor: PostgresPollers) {
        let thread = Thread { [self] in
            threadID.store(UInt(pthread_self()), ordering: .relaxed)
            _ = habitflow_name_current_thread(Self.threadNamePrefix + String(index))
            run(jobsOf: executor)
        }
        thread.start()
    }

    /// The threads' names as the system shows them (`/proc/PID/task/TID/comm`; at most 15 characters): this prefix
    /// and the poller's index.
    static let threadNamePrefix = "hf-pg-poller-"

    var isCurrentThread: Bool { threadID.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Sends `query` on `connection`, which must be bound to this poller, and waits for its rows; `nil` when the
    /// statement is not prepared on the connection yet (the caller then runs it the blocking way). Not cancellable
    /// once sent, like a blocking call: the connection must finish the statement before anyone else uses it.
    func run(_ query: PostgresQuery, on connection: LibPQConnection) async throws -> PostgresRows? {
        let socket = connection.socket
        // Busy before anything can report the socket ready, so no readiness is taken for an idle socket's; a mark
        // made since the lease's check (the server hung up just now) makes the answer be read at once.
        sockets.withLock { sockets in
            sockets.statements[socket] = .busy(readyAgain: sockets.toCheck.remove(socket) != nil)
        }
        let progress: LibPQConnection.SendProgress?
        do {
            try register(connection, socket: socket)
            progress = try connection.sendPrepared(query)
        } catch {
            endStatement(on: socket, failed: true)
            throw error
        }
        guard let progress else {
            endStatement(on: socket, failed: false)
            return nil
        }
        return try await withUnsafeThrowingContinuation { continuation in
            let waiter = Waiter(connection: connection, continuation: continuation, needsFlush: progress == .needsFlush)
            if mustReadAgain(waiter, on: socket) { collect(waiter, on: socket) }
        }
    }

    /// Whether the connection's socket must be looked at before its next lease: it is not registered here yet (it is
    /// new, or `PQreset` replaced it), it became readable while idle, or its last statement failed. Clears the mark.
    func mustCheckBeforeUse(_ connection: LibPQConnection) -> Bool {
        let socket = connection.socket
        guard connection.registeredSocket == socket else { return true }
        return sockets.withLock { $0.toCheck.remove(socket) != nil }
    }

    fileprivate func enqueue(_ job: UnownedJob) {
        let mustWake = queue.withLock { queue in
            queue.jobs.append(job)
            defer { queue.sleeping = false }
            return queue.sleeping
        }
        // Jobs enqueued by this thread itself (a continuation resumed after reading an answer) never get here with
        // `sleeping` set, so the common case costs no system call.
        if mustWake {
            var one: UInt64 = 1
            _ = write(wakeUp, &one, MemoryLayout<UInt64>.size)
        }
    }

    // MARK: - Sockets

    /// Adds the connection's socket to the epoll set once, edge-triggered, for its whole life: no system call per
    /// statement to re-arm it. A socket that `PQreset` replaced (even under the same number) is added anew.
    private func register(_ connection: LibPQConnection, socket: Int32) throws(PostgresError) {
        guard connection.registeredSocket != socket else { return }
        // A mark left by a closed socket that had this number.
        sockets.withLock { _ = $0.toCheck.remove(socket) }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLET.rawValue
        event.data.fd = socket
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event) == 0 || errno == EEXIST else {
            throw PostgresError(kind: .connectionLost, message: "cannot watch the socket: errno \(errno)")
        }
        connection.registeredSocket = socket
    }

    /// After a send or an incomplete read: `true` when the socket was reported ready meanwhile (the caller reads
    /// again), else the waiter is left for the next readiness event.
    private func mustReadAgain(_ waiter: Waiter, on socket: Int32) -> Bool {
        sockets.withLock { sockets in
            if case .busy(readyAgain: true) = sockets.statements[socket] {
                sockets.statements[socket] = .busy(readyAgain: false)
                return true
            }
            sockets.statements[socket] = .waiting(waiter)
            return false
        }
    }

    /// A readiness event of a registered socket (on the poller thread).
    private func ready(_ socket: Int32) {
        let waiter = sockets.withLock { sockets -> Waiter? in
            switch sockets.statements[socket] {
            case .waiting(let waiter):
                sockets.statements[socket] = .busy(readyAgain: false)
                return waiter
            case .busy:
                sockets.statements[socket] = .busy(readyAgain: true)
                return nil
            case nil:
                sockets.toCheck.insert(socket)
                return nil
            }
        }
        if let waiter { collect(waiter, on: socket) }
    }

    /// Flushes and reads what the socket has, by the one thread that moved the statement to `busy`; resumes the
    /// waiting task once the answer is complete.
    private func collect(_ waiter: Waiter, on socket: Int32) {
        var waiter = waiter
        while true {
            let rows: PostgresRows?
            do {
                if waiter.needsFlush, try waiter.connection.flush() == .needsFlush {
                    rows = nil
                } else {
                    waiter.needsFlush = false
                    rows = try waiter.connection.receiveResult()
                }
            } catch {
                endStatement(on: socket, failed: true)
                waiter.continuation.resume(throwing: error)
                return
            }
            if let rows {
                endStatement(on: socket, failed: false)
                waiter.continuation.resume(returning: rows)
                return
            }
            // libpq reads once per call: data it left in the socket would get no new edge-triggered event.
            if !waiter.needsFlush, waiter.connection.waitForInput(timeoutMilliseconds: 0) { continue }
            if !mustReadAgain(waiter, on: socket) { return }
        }
    }

    private func endStatement(on socket: Int32, failed: Bool) {
        sockets.withLock { sockets in
            // Readiness after the answer's end (or after a failure) is for the next lease to look at.
            if case .busy(readyAgain: true) = sockets.statements.removeValue(forKey: socket) {
                sockets.toCheck.insert(socket)
            } else if failed {
                sockets.toCheck.insert(socket)
            }
        }
    }

    // MARK: - The thread

    /// How often the thread gives its core away (`sched_yield`) and looks again, while answers are due, before it
    /// sleeps in `epoll_wait`; only while it runs the waiting tasks itself (they prefer ``PostgresPollers``, so its
    /// last turn ran jobs). With statements in flight on several connections, the next answer comes within
    /// microseconds; a sleeping poller lets its core go idle whenever the backends there wait for statements too, and
    /// waking an idle (virtual) core costs more than that wait. Yielding, not spinning: the backends on this core, the
    /// ones that produce the answers, run meanwhile. Measured with Benchmarks/postgres.sh, select:
    /// - concurrency 32, pool executor: 4–7% of the CPU idle and 0.79–0.81 of pgbench's rate sleeping at once; no idle
    ///   CPU and 0.83–0.89 with 4 to 64 yields. At concurrency 8, 15% more statements per second.
    /// - concurrency 1: nothing else runs on the core and the one answer takes a whole round trip, longer than the
    ///   yields last, so they only burned CPU (40% more per statement, same rate): at most one statement in flight,
    ///   the thread sleeps at once.
    /// - answers resumed on other threads (an event loop, the global executor): yielding cut the rate from 0.69–0.78 to
    ///   0.46–0.59 of pgbench's, with 18–21% of the CPU idle instead of 5–7%; the threads those tasks run on need the
    ///   cores, not the poller. Such a poller sleeps at once.
    static let yieldsBeforeSleeping = 8

    /// Whether statements on at least two of this poller's connections are being sent or awaiting their answers.
    private var answersAreDue: Bool { sockets.withLock { $0.statements.count >= 2 } }

    private func run(jobsOf executor: PostgresPollers) {
        let executor = executor.asUnownedTaskExecutor()
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        var jobs: [UnownedJob] = []
        var ranJobs = false
        func waitForEvents(timeoutMilliseconds: Int32) -> Int32 {
            events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, 64, timeoutMilliseconds) }
        }
        while true {
            // Block only when no job is waiting; otherwise just collect what is ready. While this thread runs the
            // tasks and answers are due, yield before blocking (`yieldsBeforeSleeping`).
            let mayBlock = queue.withLock { queue in
                queue.sleeping = queue.jobs.isEmpty
                return queue.sleeping
            }
            var yields = mayBlock && ranJobs && answersAreDue ? Self.yieldsBeforeSleeping : 0
            var count = waitForEvents(timeoutMilliseconds: mayBlock && yields == 0 ? -1 : 0)
            while count == 0 && mayBlock {
                if yields > 0 && answersAreDue {
                    yields -= 1
                    sched_yield()
                    count = waitForEvents(timeoutMilliseconds: 0)
                } else {
                    count = waitForEvents(timeoutMilliseconds: -1)
                }
            }
            if mayBlock { queue.withLock { $0.sleeping = false } }
            if count < 0 {
                precondition(errno == EINTR, "epoll_wait failed: errno \(errno)")
                continue
            }
            for index in 0..<Int(count) {
                let socket = events[index].data.fd
                if socket == wakeUp {
                    var value: UInt64 = 0
                    _ = read(wakeUp, &value, MemoryLayout<UInt64>.size)
                } else {
                    ready(socket)
                }
            }
            // The jobs of the tasks resumed above, and of any enqueued meanwhile: they send their next statements
            // before the thread waits again.
            queue.withLock { swap(&jobs, &$0.jobs) }
            for job in jobs { job.runSynchronously(on: executor) }
            ranJobs = !jobs.isEmpty
            jobs.removeAll(keepingCapacity: true)
        }
    }
}
