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

/// The deadline timer of a connection: one timer for all its calls, armed for the earliest deadline and re-armed by
/// the owner when it fires. Scheduling and cancelling a timer per call was about 3% of a forwarded call in the
/// gateway's profile; with this a call costs a comparison. Event loop only, like the connection handler owning it.
package struct ConnectionDeadlineTimer {
    private var scheduled: Scheduled<Void>?
    private var firesAt: NIODeadline?

    package init() {}

    /// Makes the timer fire no later than `deadline`, when `expire` runs on `eventLoop`: it must call ``fired()``,
    /// end the calls past their deadline and call this again with the earliest deadline left.
    package mutating func fire(
        by deadline: NIODeadline, on eventLoop: any EventLoop, _ expire: @escaping @Sendable () -> Void
    ) {
        if let firesAt, firesAt <= deadline { return }
        scheduled?.cancel()
        firesAt = deadline
        scheduled = eventLoop.scheduleTask(deadline: deadline, expire)
    }

    /// The timer went off: nothing is scheduled any more.
    package mutating func fired() {
        scheduled = nil
        firesAt = nil
    }

    package mutating func cancel() {
        scheduled?.cancel()
        fired()
    }

    /// The calls whose deadline has passed at `now`, and the earliest deadline among the others: what the owner ends
    /// and re-arms for when the timer fires. `deadline` is `nil` for a call without one or that has ended.
    package static func sweep<Call>(
        _ calls: some Sequence<Call>, now: NIODeadline = .now(), deadline: (Call) -> NIODeadline?
    ) -> (expired: [Call], next: NIODeadline?) {
        var expired: [Call] = []
        var next: NIODeadline?
        for call in calls {
            guard let due = deadline(call) else { continue }
            if due <= now {
                expired.append(call)
            } else {
                next = min(next ?? due, due)
            }
        }
        return (expired, next)
    }
}
