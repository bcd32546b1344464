import HabitFlowLocking
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@testable import HabitFlowHTTP2

/// The timers of all connections on an event loop share one queue (`ConnectionTimerQueue`) behind one task of the
/// loop; a connection reaches it through its `ConnectionTimers`. These run on a real event loop with real time.
@Suite("The connection timers of an event loop")
struct ConnectionTimerQueueTests {
    typealias Timer = ConnectionStateMachine.Timer

    /// A connection as far as its timers go: it records what fired, and may start a timer again when one fires.
    final class Connection: ConnectionTimerOwner, Sendable {
        struct State {
            var timers = ConnectionTimers()
            var fired: [Timer] = []
            /// The time each timer went off at, as the queue told it.
            var firedAt: [NIODeadline] = []
            var callDeadlinesPassed = 0
            /// Timers to start again this much later when they fire, and how many more times.
            var rearm: [Timer: (after: TimeAmount, times: Int)] = [:]
        }

        let eventLoop: any EventLoop
        let state = Locked(State())

        init(eventLoop: any EventLoop) {
            self.eventLoop = eventLoop
        }

        func schedule(_ timer: Timer, in delay: TimeAmount) {
            state.withLock { $0.timers.schedule(timer, at: .now() + delay, on: eventLoop, owner: self) }
        }

        func cancel(_ timer: Timer) { state.withLock { $0.timers.cancel(timer) } }

        func expireCalls(in delay: TimeAmount) {
            state.withLock { $0.timers.expireCalls(by: .now() + delay, on: eventLoop, owner: self) }
        }

        func close() { state.withLock { $0.timers.close() } }

        var fired: [Timer] { state.withLock { $0.fired } }

        var firedAt: [NIODeadline] { state.withLock { $0.firedAt } }

        var callDeadlinesPassed: Int { state.withLock { $0.callDeadlinesPassed } }

        func callDeadlinePassed(now: NIODeadline) { state.withLock { $0.callDeadlinesPassed += 1 } }

        func timerFired(_ timer: Timer, now: NIODeadline) {
            state.withLock { state in
                state.fired.append(timer)
                state.firedAt.append(now)
                guard let again = state.rearm[timer], again.times > 0 else { return }
                state.rearm[timer] = (again.after, again.times - 1)
                state.timers.schedule(timer, at: .now() + again.after, on: eventLoop, owner: self)
            }
        }
    }

    /// Runs `body` on a fresh one-thread event loop, then shuts the loop down.
    func onEventLoop(_ body: (any EventLoop) throws -> Void) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        try body(group.next())
    }

    @Test("timers of several connections fire in deadline order; replaced and cancelled ones do not fire")
    func firesInOrder() throws {
        try onEventLoop { loop in
            let first = Connection(eventLoop: loop)
            let second = Connection(eventLoop: loop)
            try loop.submit {
                first.schedule(.idle, in: .milliseconds(60))
                first.schedule(.keepalive, in: .milliseconds(20))
                second.schedule(.header, in: .milliseconds(40))
                second.schedule(.age, in: .milliseconds(30))
                second.schedule(.age, in: .milliseconds(80))  // replaces the one at 30
                first.schedule(.grace, in: .milliseconds(50))
                first.cancel(.grace)
            }.wait()
            try loop.scheduleTask(in: .milliseconds(150)) {}.futureResult.wait()
            try loop.submit {
                #expect(first.fired == [.keepalive, .idle])
                #expect(second.fired == [.header, .age])
                first.close()
                second.close()
            }.wait()
        }
    }

    @Test("a timer started by a firing one fires, and one started earlier than the one waited for wakes the loop sooner")
    func startedWhileWaitingOrFiring() throws {
        try onEventLoop { loop in
            let connection = Connection(eventLoop: loop)
            let eager = Connection(eventLoop: loop)
            connection.state.withLock { $0.rearm[.keepalive] = (.milliseconds(10), 3) }
            try loop.submit {
                connection.schedule(.idle, in: .seconds(60))
                connection.schedule(.keepalive, in: .milliseconds(10))
                eager.schedule(.header, in: .milliseconds(5))
            }.wait()
            try loop.scheduleTask(in: .milliseconds(200)) {}.futureResult.wait()
            try loop.submit {
                #expect(connection.fired == [.keepalive, .keepalive, .keepalive, .keepalive])
                #expect(eager.fired == [.header])
                connection.close()
                eager.close()
            }.wait()
        }
    }

    @Test("timers follow the loop's clock: an EmbeddedEventLoop moved an hour on fires them at once, at its time")
    func embeddedLoopTime() throws {
        let loop = EmbeddedEventLoop()
        defer { try? loop.syncShutdownGracefully() }
        let connection = Connection(eventLoop: loop)
        let scheduled = NIODeadline.now()
        connection.schedule(.age, in: .seconds(3))
        connection.schedule(.idle, in: .seconds(1_800))
        let started = ContinuousClock.now
        loop.advanceTime(to: .now() + .hours(1))
        #expect(ContinuousClock.now - started < .seconds(1), "the timers waited for the machine's clock")
        #expect(connection.fired == [.age, .idle])
        // What the connection measures against (a header or idle timer checks how long it has been): the loop's
        // time, ahead of the machine's, so that it never finds a timer the loop fired not yet due and sets it again.
        let firedAt = connection.firedAt
        #expect(firedAt.count == 2 && firedAt[0] >= scheduled + .seconds(3) && firedAt[1] >= scheduled + .seconds(1_800))
        connection.close()
    }

    @Test("the call deadline timer goes off once, for the earliest deadline asked for")
    func callDeadlineMovesOnlyEarlier() throws {
        try onEventLoop { loop in
            let connection = Connection(eventLoop: loop)
            try loop.submit {
                connection.expireCalls(in: .milliseconds(40))
                connection.expireCalls(in: .seconds(60))  // a later call's deadline: the timer stays at 40 ms
            }.wait()
            try loop.scheduleTask(in: .milliseconds(100)) {}.futureResult.wait()
            #expect(connection.callDeadlinesPassed == 1)
            try loop.submit {
                connection.expireCalls(in: .milliseconds(40))
                connection.expireCalls(in: .milliseconds(10))  // an earlier one: the timer moves, and goes off once
            }.wait()
            try loop.scheduleTask(in: .milliseconds(100)) {}.futureResult.wait()
            try loop.submit {
                #expect(connection.callDeadlinesPassed == 2)
                #expect(connection.fired == [])
                connection.close()
            }.wait()
        }
    }

    @Test("a closed connection's timers never fire, and the loop's queue lets go of the connection and of itself")
    func closedConnectionIsForgotten() throws {
        try onEventLoop { loop in
            weak var closedConnection: Connection?
            let other = Connection(eventLoop: loop)
            try {
                let connection = Connection(eventLoop: loop)
                closedConnection = connection
                try loop.submit {
                    connection.schedule(.keepalive, in: .milliseconds(20))
                    other.schedule(.keepalive, in: .milliseconds(40))
                    connection.close()
                    connection.schedule(.idle, in: .milliseconds(10))  // after closing: never starts
                }.wait()
                try loop.scheduleTask(in: .milliseconds(100)) {}.futureResult.wait()
                try loop.submit {
                    #expect(connection.fired == [])
                    #expect(other.fired == [.keepalive])
                }.wait()
            }()
            try loop.submit {}.wait()  // the loop has let go of the tasks above, which held the connection
            #expect(closedConnection == nil, "the queue still holds a closed connection")
            let (before, after) = try loop.submit {
                other.schedule(.idle, in: .seconds(60))
                let before = ConnectionTimerQueue.existing(on: loop) != nil
                other.close()
                return (before, ConnectionTimerQueue.existing(on: loop) != nil)
            }.wait()
            #expect(before && !after, "the queue outlived the last connection of its loop")
        }
    }

    @Test("replacing and cancelling timers over and over keeps the queue to about twice the timers running")
    func forgottenEntriesAreDropped() throws {
        try onEventLoop { loop in
            let connections = (0..<100).map { _ in Connection(eventLoop: loop) }
            try loop.submit {
                for round in 0..<2_000 {
                    for connection in connections.prefix(10) {
                        connection.schedule(.memoryRelease, in: .seconds(60 + Int64(round)))
                    }
                    connections[round % 100].schedule(.idle, in: .seconds(600))
                    connections[(round + 50) % 100].cancel(.idle)
                }
                // At most 110 running: a memory release timer on 10 connections, an idle timer on each.
                let entries = ConnectionTimerQueue.existing(on: loop)?.entryCount ?? 0
                #expect(entries > 0 && entries <= 2 * 110 + 256, "\(entries) entries for at most 110 timers")
                for connection in connections { connection.close() }
            }.wait()
        }
    }
}
