internal import CLibPQ
internal import Foundation
internal import Synchronization

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// One thread that waits, with epoll, for the answers of every statement sent with libpq's non-blocking API, and
/// resumes each waiting task when its answer is complete.
///
/// Why: a thread blocked in `PQexecPrepared` per connection costs two thread wake-ups per statement (hand the work to
/// the thread, hand the result back) and, at 32 connections on 2 cores, constant context switching. Here the caller
/// sends on its own thread and this one thread collects answers for all connections, usually several per wake-up —
/// the way pgbench drives its connections.
final class PostgresPoller: Sendable {
    /// All pools share one poller; its thread lives as long as the process, like SwiftNIO's singleton loops.
    static let shared = PostgresPoller()

    private struct Waiter {
        var connection: LibPQConnection
        var continuation: UnsafeContinuation<PostgresRows, any Error>
    }

    private let epoll: Int32
    /// Waiting statements by socket. A socket has at most one: a connection runs one statement at a time.
    private let waiters = Mutex<[Int32: Waiter]>([:])

    private init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: errno \(errno)")
        let thread = Thread { [self] in run() }
        thread.name = "habitflow-postgres-poller"
        thread.start()
    }

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
        while true {
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, 64, -1) }
            if count < 0 {
                precondition(errno == EINTR, "epoll_wait failed: errno \(errno)")
                continue
            }
            for index in 0..<Int(count) {
                handle(events[index].data.fd, writable: events[index].events & EPOLLOUT.rawValue != 0)
            }
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
