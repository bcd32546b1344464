public import NIOCore

/// The running timers of one connection's ``ConnectionStateMachine``: at most one of each kind, stored inline (no
/// allocation per connection beyond NIO's own per scheduled task).
public struct ConnectionTimers {
    private var header: Scheduled<Void>?
    private var idle: Scheduled<Void>?
    private var age: Scheduled<Void>?
    private var keepalive: Scheduled<Void>?
    private var keepaliveTimeout: Scheduled<Void>?
    private var finalGoaway: Scheduled<Void>?
    private var grace: Scheduled<Void>?
    private var memoryRelease: Scheduled<Void>?

    public init() {}

    /// Starts `timer` (replacing one of its kind still running) to call `fire` on `eventLoop` at `deadline`.
    public mutating func schedule(
        _ timer: ConnectionStateMachine.Timer, at deadline: NIODeadline, on eventLoop: any EventLoop,
        _ fire: @escaping @Sendable () -> Void
    ) {
        self[timer]?.cancel()
        self[timer] = eventLoop.scheduleTask(deadline: deadline, fire)
    }

    /// `timer` went off: forgotten, not cancelled. Cancelling a task that already ran makes NIO search every task
    /// scheduled on the event loop for it (one per timer of every connection): at 10,000 connections, re-arming the
    /// memory release timers that way took a tenth of the gateway's CPU.
    public mutating func fired(_ timer: ConnectionStateMachine.Timer) {
        self[timer] = nil
    }

    public mutating func cancel(_ timer: ConnectionStateMachine.Timer) {
        self[timer]?.cancel()
        self[timer] = nil
    }

    public mutating func cancelAll() {
        for timer in ConnectionStateMachine.Timer.allCases { cancel(timer) }
    }

    private subscript(timer: ConnectionStateMachine.Timer) -> Scheduled<Void>? {
        get {
            switch timer {
            case .header: header
            case .idle: idle
            case .age: age
            case .keepalive: keepalive
            case .keepaliveTimeout: keepaliveTimeout
            case .finalGoaway: finalGoaway
            case .grace: grace
            case .memoryRelease: memoryRelease
            }
        }
        set {
            switch timer {
            case .header: header = newValue
            case .idle: idle = newValue
            case .age: age = newValue
            case .keepalive: keepalive = newValue
            case .keepaliveTimeout: keepaliveTimeout = newValue
            case .finalGoaway: finalGoaway = newValue
            case .grace: grace = newValue
            case .memoryRelease: memoryRelease = newValue
            }
        }
    }
}
