import HabitFlowLocking
import HabitFlowTestSupport
import Testing

/// `Wakeup`, which the change-notice streams, the outbox relay and the gateway's watchers wait on.
@Suite struct WakeupTests {
    @Test func aSignalBeforeTheWaitEndsItAtOnceAndSignalsCoalesce() async {
        let wakeup = Wakeup()
        wakeup.signal()
        wakeup.signal()
        let clock = ContinuousClock()
        let started = clock.now
        await wakeup.wait(timeout: .seconds(30))
        #expect(clock.now - started < .seconds(5))
        // Both signals came before that one wait: the next wait has nothing pending and runs to its timeout.
        let second = clock.now
        await wakeup.wait(timeout: .milliseconds(50))
        #expect(clock.now - second >= .milliseconds(50))
    }

    @Test func anUntimedWaitEndsAtTheNextSignal() async throws {
        let wakeup = Wakeup()
        let woken = Shared(false)
        let waiter = Task {
            await wakeup.wait()
            woken.value = true
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!woken.value)
        wakeup.signal()
        await waiter.value
        #expect(woken.value)
    }

    @Test func anUntimedWaitEndsWhenItsTaskIsCancelled() async throws {
        let wakeup = Wakeup()
        let waiter = Task { await wakeup.wait() }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        await waiter.value
    }
}
