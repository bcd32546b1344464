public import NIOCore

/// The running timers of one connection: those of its ``ConnectionStateMachine`` and the one for its calls'
/// deadlines. They live in the connection's slot in its event loop's ``ConnectionTimerQueue``, taken when the first
/// timer starts.
public struct ConnectionTimers {
    private var queue: ConnectionTimerQueue?
    private var slot: UInt32 = 0
    private var closed = false

    public init() {}

    /// Starts `timer` (replacing one of its kind still running) to call `owner.timerFired(timer, now:)` on `eventLoop`
    /// at `deadline`. Nothing starts once the connection closed.
    public mutating func schedule(
        _ timer: ConnectionStateMachine.Timer, at deadline: NIODeadline, on eventLoop: any EventLoop,
        owner: any ConnectionTimerOwner
    ) {
        queue(on: eventLoop, owner: owner)?.schedule(.init(timer), at: deadline, slot: slot)
    }

    /// Makes the call deadline timer go off no later than `deadline` (`owner.callDeadlinePassed(now:)`): one timer for
    /// all the connection's calls, so a call costs a comparison, not a timer of its own.
    public mutating func expireCalls(
        by deadline: NIODeadline, on eventLoop: any EventLoop, owner: any ConnectionTimerOwner
    ) {
        queue(on: eventLoop, owner: owner)?.schedule(.callDeadline, at: deadline, slot: slot, onlyEarlier: true)
    }

    public func cancel(_ timer: ConnectionStateMachine.Timer) {
        queue?.cancel(.init(timer), slot: slot)
    }

    /// The connection is gone: no timer fires for it any more, none starts, and its queue no longer holds it.
    public mutating func close() {
        closed = true
        queue?.unregister(slot)
        queue = nil
    }

    private mutating func queue(on eventLoop: any EventLoop, owner: any ConnectionTimerOwner) -> ConnectionTimerQueue? {
        guard !closed else { return nil }
        if let queue { return queue }
        let queue = ConnectionTimerQueue.on(eventLoop)
        slot = queue.register(owner)
        self.queue = queue
        return queue
    }
}

/// The calls whose deadline has passed at `now`, and the earliest deadline among the others: what a connection ends,
/// and sets its call deadline timer for, when the timer goes off. `deadline` is `nil` for a call without one or that
/// has ended.
package func sweepCallDeadlines<Call>(
    _ calls: some Sequence<Call>, now: NIODeadline, deadline: (Call) -> NIODeadline?
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
