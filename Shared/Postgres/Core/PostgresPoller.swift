internal import CLibPQ
internal import Foundation
internal import Synchronization

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// One thread that waits, with epoll, for the answers of every statement sent with libpq's non-blocking API, and
/// resumes each waiting task when its answer is complete. It is also a `TaskExecutor`: a task that prefers it
/// (``PostgresPool/taskExecutor``) continues on this thread right after its answer is read, and sends its next
/// statement from here too, so a statement costs no thread wake-up at all.
///
/// Why: a thread blocked in `PQexecPrepared` per connection costs two thread wake-ups per statement (hand the work to
/// the thread, hand the result back) and, at 32 connections on 2 cores, constant context switching. Here the caller
/// sends on its own thread and this one thread collects answers for all connections, usually several per wake-up —
/// the way pgbench drives its connections. A task without a preference still pays one wake-up per statement (its
/// continuation goes to the global executor); Benchmarks/postgres.sh measured that hand-off at about half of the
/// client's CPU per statement.
///
/// - Important: only non-blocking work runs on this thread. Blocking libpq calls go to the pool's threads, whatever
///   executor the calling task prefers.
final class PostgresPoller: TaskExecutor, Sendable {
    /// All pools share one poller; its thread lives as long as the process, like SwiftNIO's singleton loops.
    static let shared = PostgresPoller()

    private struct Waiter {
        var connection: LibPQConnection
        var continuation: UnsafeContinuation<PostgresRows, any Error>
    }

    /// Jobs of tasks that prefer this executor, run between two epoll waits.
    private struct JobQueue {
        var jobs: [UnownedJob] = []
        /// The thread is (about to be) blocked in `epoll_wait`: an enqueue from another thread must wake it.
        var sleeping = false
    }

    private let epoll: Int32
    /// An eventfd in the epoll set: written to wake the thread for jobs enqueued from other threads.
    private let wakeUp: Int32
    /// Waiting statements by socket. A socket has at most one: a connection runs one statement at a time.
    private let waiters = Mutex<[Int32: Waiter]>([:])
    private let queue = Mutex(JobQueue())

    private init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: errno \(errno)")
        wakeUp = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(wakeUp >= 0, "eventfd failed: errno \(errno)")
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeUp
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, wakeUp, &event) == 0, "epoll_ctl failed: errno \(errno)")
        let thread = Thread { [self] in
            _ = habitflow_name_current_thread(Self.threadName)
            run()
        }
        thread.start()
    }

    /// The thread's name as the system shows it (`/proc/PID/task/TID/comm`; at most 15 characters).
    static let threadName = "hf-pg-poller"

    /// Sends `query` on `connection` and waits for its rows; `nil` when the statement is not prepared on the
    /// connection yet (the caller then runs it the blocking way). Not cancellable once sent, like a blocking call:
    /// the connection must finish the statement before anyone else uses it.
    func run(_ query: PostgresQuery, on connection: LibPQConnection) async throws -> PostgresRows? {
        guard let progress = try connection.sendPrepared(query) else { return nil }
        return try await withUnsafeThrowingContinuation { continuation in
            let socket = connection.socket
            waiters.withLock { $0[socket] = Waiter(connection: connection, continuation: continuation) }
            watch(socket, writable: progress == .needsFlush)
        }
    }

    // MARK: - TaskExecutor

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
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

    // MARK: - The thread

    /// Arms the socket for one readiness event (EPOLLONESHOT: the next wait needs a new arming, so a socket is never
    /// reported while nobody waits on it).
    private func watch(_ socket: Int32, writable: Bool) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLONESHOT.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = socket
        // Registered once per socket, re-armed afterwards; a new socket (after PQreset) gets added.
        if epoll_ctl(epoll, EPOLL_CTL_MOD, socket, &event) != 0 {
            if errno == ENOENT, epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event) == 0 { return }
            finish(socket, with: .failure(PostgresError(kind: .connectionLost, message: "cannot watch the socket: errno \(errno)")))
        }
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        var jobs: [UnownedJob] = []
        while true {
            // Block only when no job is waiting; otherwise just collect what is ready.
            let timeout: Int32 = queue.withLock { queue in
                queue.sleeping = queue.jobs.isEmpty
                return queue.sleeping ? -1 : 0
            }
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, 64, timeout) }
            if timeout != 0 { queue.withLock { $0.sleeping = false } }
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
                    handle(socket, writable: events[index].events & EPOLLOUT.rawValue != 0)
                }
            }
            queue.withLock { swap(&jobs, &$0.jobs) }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
            jobs.removeAll(keepingCapacity: true)
        }
    }

    private func handle(_ socket: Int32, writable: Bool) {
        guard let connection = waiters.withLock({ $0[socket]?.connection }) else { return }
        do {
            if writable, try connection.flush() == .needsFlush {
                watch(socket, writable: true)
                return
            }
            if let rows = try connection.receiveResult() {
                finish(socket, with: .success(rows))
            } else {
                watch(socket, writable: false)
            }
        } catch {
            finish(socket, with: .failure(error))
        }
    }

    private func finish(_ socket: Int32, with result: Result<PostgresRows, any Error>) {
        guard let waiter = waiters.withLock({ $0.removeValue(forKey: socket) }) else { return }
        waiter.continuation.resume(with: result)
    }
}
