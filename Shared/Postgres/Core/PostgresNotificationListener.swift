public import Logging
internal import NIOPosix
internal import Synchronization

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// Listens for `NOTIFY` on channels over its own connection, reconnecting when it breaks.
///
/// The connection waits in `poll(2)` on its own thread (not the pool's, not the cooperative pool). After every
/// (re)connection the stream yields ``Event/listening``: notifications sent while disconnected are lost, so a
/// consumer should then look for work as if notified. It also yields ``Event/listening`` when the consumer fell so far
/// behind that the oldest buffered notifications were dropped.
public final class PostgresNotificationListener: Sendable {
    public enum Event: Sendable, Hashable {
        /// Connected and listening (first time or after a reconnection).
        case listening
        /// The connection was lost: notifications are missed until the next `listening`.
        case lost
        case notification(PostgresNotification)
    }

    /// Channel names: letters, digits and `_`, starting with a letter or `_`, at most 63 bytes.
    public let channels: [String]
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let connectionString: String
    private let logger: Logger
    private let stopRequested = Atomic<Bool>(false)

    public init(connectionString: String, channels: [String], logger: Logger) throws(PostgresError) {
        for channel in channels {
            let valid = !channel.isEmpty && channel.utf8.count <= 63 && channel.first.map { $0 == "_" || $0.isLetter } == true
                && channel.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
            guard valid else { throw PostgresError(kind: .invalidParameter, message: "bad channel name \"\(channel)\"") }
        }
        self.channels = channels
        self.connectionString = connectionString
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1024))
    }

    /// Listens until the calling task is cancelled, then closes the connection and finishes ``events``.
    public func run() async {
        await run { [continuation] event in
            // The buffer keeps the newest events: a consumer that fell this far behind lost the oldest ones, so it
            // is told to look everywhere, as after a reconnection.
            if case .dropped = continuation.yield(event) { continuation.yield(.listening) }
        }
        continuation.finish()
    }

    /// Listens until the calling task is cancelled, handing every event to `deliver` on the listener's own thread as
    /// it arrives, instead of to ``events``: no task wakes up in between. For a consumer whose handling is quick and
    /// never blocks (a few locks), such as the change-notice fan-out, which runs for every write.
    public func run(delivering deliver: @escaping @Sendable (Event) -> Void) async {
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                thread.submit { [self] _ in
                    listenLoop(deliver)
                    done.resume()
                }
            }
        } onCancel: {
            stopRequested.store(true, ordering: .relaxed)
        }
        try? await thread.shutdownGracefully()
    }

    /// Blocking; runs on the listener's own thread.
    private func listenLoop(_ deliver: (Event) -> Void) {
        var connection: LibPQConnection?
        var retryDelay = 0.1
        while !stopRequested.load(ordering: .relaxed) {
            guard let current = connection else {
                do {
                    let opened = try LibPQConnection(connectionString: connectionString)
                    for channel in channels {
                        // LISTEN takes an identifier, not a parameter: the validated name is quoted by libpq.
                        try opened.executeScript("LISTEN " + opened.quotedIdentifier(channel))
                    }
                    connection = opened
                    retryDelay = 0.1
                    logger.debug("listening for notifications", metadata: ["channels": "\(channels)"])
                    deliver(.listening)
                } catch {
                    logger.warning("notification listener cannot connect", metadata: ["error": "\(error)"])
                    sleepUnlessStopped(seconds: retryDelay)
                    retryDelay = min(retryDelay * 2, 5)
                }
                continue
            }
            _ = current.waitForInput(timeoutMilliseconds: 250)
            do {
                for notification in try current.receiveNotifications() { deliver(.notification(notification)) }
            } catch {
                logger.warning("notification listener lost its connection", metadata: ["error": "\(error)"])
                current.close()
                connection = nil
                deliver(.lost)
            }
        }
        connection?.close()
    }

    private func sleepUnlessStopped(seconds: Double) {
        var remaining = seconds
        while remaining > 0, !stopRequested.load(ordering: .relaxed) {
            usleep(UInt32(min(remaining, 0.1) * 1_000_000))
            remaining -= 0.1
        }
    }
}
