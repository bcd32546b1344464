import HabitFlowLocking
public import NIOCore

/// What a ``ConnectionTimerQueue`` calls when one of its timers goes off: a connection handler. `now` is the event
/// loop's time it went off at: what the owner measures against, so that a timer whose deadline passed on the loop's
/// clock is never found not yet due (an `EmbeddedEventLoop` moved on runs ahead of the machine's clock).
public protocol ConnectionTimerOwner: AnyObject {
    func timerFired(_ timer: ConnectionStateMachine.Timer, now: NIODeadline)
    /// The deadline the call deadline timer was set for passed (``ConnectionTimers/expireCalls(by:on:owner:)``): end
    /// the calls past their deadline and set the timer for the earliest one left.
    func callDeadlinePassed(now: NIODeadline)
}

/// The timers of every connection on one event loop (its lifecycle's and its calls' deadlines), behind one scheduled
/// task of the loop.
///
/// Why not a NIO task per timer: at 10,000 connections a loop held 40,000 of them. Each schedule allocated a promise
/// and a closure and moved `ScheduledTask`s (retaining as they go) through NIO's heap, and NIO cancels a task by
/// searching every task on the loop, which each closing connection paid once per running timer. Here a timer is a
/// deadline in a table plus a plain 24-byte entry in a heap. Cancelling forgets the deadline; the entry is dropped when
/// it comes up, or when forgotten entries outnumber the rest. The loop's one task is set for the earliest deadline.
///
/// There is one queue per event loop while connections on it have timers (``on(_:)``); it is used on its loop only,
/// and goes away when its last connection does, so nothing outlives the connections (an `EmbeddedEventLoop` in tests).
final class ConnectionTimerQueue {
    typealias Timer = ConnectionStateMachine.Timer

    /// A timer set to go off: current while its slot's generation and the table's deadline still match.
    private struct Entry {
        var deadline: UInt64
        var slot: UInt32
        var generation: UInt32
        var kind: Kind
    }

    /// A connection's timers: one per lifecycle ``Timer`` (its raw value) and the one for its calls' deadlines.
    struct Kind: Equatable {
        let index: UInt8

        init(_ timer: Timer) { index = timer.rawValue }

        private init(index: UInt8) { self.index = index }

        static let callDeadline = Kind(index: UInt8(Timer.allCases.count))
        static let all = (0...callDeadline.index).map { Kind(index: $0) }
    }

    /// A registered connection. The generation changes when the slot is freed, so entries of an earlier owner of
    /// the slot are never taken for the new owner's.
    private struct Slot {
        var owner: (any ConnectionTimerOwner)?
        var generation: UInt32 = 0
    }

    let eventLoop: any EventLoop
    private var slots: [Slot] = []
    private var freeSlots: [UInt32] = []
    private var registered = 0
    /// Per slot, one deadline per ``Kind`` (uptime nanoseconds; 0: not running).
    private var deadlines: [UInt64] = []
    /// A binary min-heap by deadline.
    private var heap: [Entry] = []
    /// How many of the heap's entries are no longer current.
    private var forgottenEntries = 0
    private var alarm: (deadline: UInt64, task: Scheduled<Void>)?
    private var firing = false

    private static let kindsPerSlot = Kind.all.count
    private static let queues = Locked<[ObjectIdentifier: NIOLoopBound<ConnectionTimerQueue>]>([:])

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// The queue of `eventLoop`, made when none exists. Call it on that loop.
    static func on(_ eventLoop: any EventLoop) -> ConnectionTimerQueue {
        let bound = queues.withLock { queues in
            if let queue = queues[ObjectIdentifier(eventLoop)] { return queue }
            let queue = NIOLoopBound(ConnectionTimerQueue(eventLoop: eventLoop), eventLoop: eventLoop)
            queues[ObjectIdentifier(eventLoop)] = queue
            return queue
        }
        return bound.value
    }

    /// The queue of `eventLoop` if one exists (for tests). Call it on that loop.
    static func existing(on eventLoop: any EventLoop) -> ConnectionTimerQueue? {
        queues.withLock { $0[ObjectIdentifier(eventLoop)] }?.value
    }

    /// How many heap entries there are, forgotten ones included (for tests: they must stay bounded).
    var entryCount: Int { heap.count }

    // MARK: Connections

    /// A connection's slot, its timers' key until ``unregister(_:)``.
    func register(_ owner: any ConnectionTimerOwner) -> UInt32 {
        registered += 1
        if let slot = freeSlots.popLast() {
            slots[Int(slot)].owner = owner
            return slot
        }
        slots.append(Slot(owner: owner))
        deadlines.append(contentsOf: repeatElement(0, count: Self.kindsPerSlot))
        return UInt32(slots.count - 1)
    }

    /// The connection is gone: its timers are forgotten and the queue no longer holds it. The last one out takes the
    /// queue away.
    func unregister(_ slot: UInt32) {
        for kind in Kind.all { cancel(kind, slot: slot) }
        slots[Int(slot)].owner = nil
        slots[Int(slot)].generation &+= 1
        freeSlots.append(slot)
        registered -= 1
        if registered == 0 { retire() }
    }

    private func retire() {
        alarm?.task.cancel()
        alarm = nil
        (slots, freeSlots, deadlines, heap, forgottenEntries) = ([], [], [], [], 0)
        let id = ObjectIdentifier(eventLoop)
        Self.queues.withLock { queues in
            if queues[id]?.value === self { queues[id] = nil }
        }
    }

    // MARK: Timers

    /// Starts timer `kind` of `slot`'s connection for `deadline`, replacing the one running; with `onlyEarlier`,
    /// only when none is running or it would go off later.
    func schedule(_ kind: Kind, at deadline: NIODeadline, slot: UInt32, onlyEarlier: Bool = false) {
        let index = Self.index(slot: slot, kind: kind)
        let nanoseconds = max(1, deadline.uptimeNanoseconds)
        if deadlines[index] != 0 {
            if onlyEarlier && deadlines[index] <= nanoseconds { return }
            forgottenEntries += 1
        }
        deadlines[index] = nanoseconds
        push(Entry(deadline: nanoseconds, slot: slot, generation: slots[Int(slot)].generation, kind: kind))
        if !firing { armAlarm() }
    }

    func cancel(_ kind: Kind, slot: UInt32) {
        let index = Self.index(slot: slot, kind: kind)
        guard deadlines[index] != 0 else { return }
        deadlines[index] = 0
        forgottenEntries += 1
    }

    /// Fires every timer that is due, then waits for the next.
    private func alarmWentOff() {
        alarm = nil
        // The loop's clock, not the machine's: an `EmbeddedEventLoop` (the HTTP/2 fuzz target) runs tasks by its own.
        let now = eventLoop.now
        firing = true
        while let first = heap.first, first.deadline <= now.uptimeNanoseconds {
            popFirst()
            guard isCurrent(first) else {
                forgottenEntries -= 1
                continue
            }
            deadlines[Self.index(slot: first.slot, kind: first.kind)] = 0
            // The owner may schedule (the heap grows; the alarm waits until this loop is done) or close (its slot
            // is freed; the rest of its entries are no longer current).
            guard let owner = slots[Int(first.slot)].owner else { continue }
            if first.kind == .callDeadline {
                owner.callDeadlinePassed(now: now)
            } else {
                owner.timerFired(Timer(rawValue: first.kind.index)!, now: now)
            }
        }
        firing = false
        if registered > 0 { armAlarm() }
    }

    /// Sets the loop's task for the earliest current deadline; an alarm already set no later stays (it re-arms when
    /// it goes off), so most schedules cost no call into NIO.
    private func armAlarm() {
        while let first = heap.first, !isCurrent(first) {
            popFirst()
            forgottenEntries -= 1
        }
        if forgottenEntries > 256 && forgottenEntries * 2 > heap.count { dropForgottenEntries() }
        guard let first = heap.first else { return }
        if let alarm, alarm.deadline <= first.deadline { return }
        alarm?.task.cancel()
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let task = eventLoop.scheduleTask(deadline: .uptimeNanoseconds(first.deadline)) { bound.value.alarmWentOff() }
        alarm = (first.deadline, task)
    }

    /// Keeps the heap to about twice the running timers, however often they are replaced or cancelled.
    private func dropForgottenEntries() {
        heap.removeAll { !isCurrent($0) }
        forgottenEntries = 0
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
    }

    private func isCurrent(_ entry: Entry) -> Bool {
        slots[Int(entry.slot)].generation == entry.generation
            && deadlines[Self.index(slot: entry.slot, kind: entry.kind)] == entry.deadline
    }

    private static func index(slot: UInt32, kind: Kind) -> Int { Int(slot) * kindsPerSlot + Int(kind.index) }

    // MARK: The heap

    private func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func popFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(from: 0)
    }

    private func siftDown(from start: Int) {
        var parent = start
        while true {
            var smallest = parent
            let left = 2 * parent + 1
            let right = left + 1
            if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
