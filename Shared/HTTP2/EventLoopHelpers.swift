public import NIOCore

// Conveniences the client and server transports share.

extension EventLoop {
    /// Runs `work` at once when already on this loop (no hop), else enqueues it.
    package func executeOrRunNow(_ work: @escaping @Sendable () -> Void) {
        if inEventLoop { work() } else { execute(work) }
    }
}

/// Runs tasks on one SwiftNIO event loop. A server runs its handlers on their connection's loop; a client task that
/// prefers a loop (`Task(executorPreference:)`, `withTaskExecutorPreference`) gets its calls placed on connections of
/// that loop (see `RPCChannel`), so a call that does not wait for anything else never changes threads.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let eventLoop: any EventLoop

    public init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
