/// Wakes one waiting task, or the next one to wait if none is waiting; a wait also ends at a timeout.
///
/// Signals coalesce: any number of them before a wait end that one wait (a flag, not a queue), so a producer never
/// piles up work for a slow consumer (the outbox relay's loops, the gateway's watchers).
public final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiterID = 0
        var waiter: CheckedContinuation<Void, Never>?
        /// The current wait's timeout or cancellation came before it registered its continuation.
        var firedID: Int?
    }

    private let state = Locked(State())

    public init() {}

    public func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at a signal (including one that came since the last wait), at the timeout or on cancellation.
    public func wait(timeout: Duration) async {
        await wait(orTimeout: timeout)
    }

    /// Returns at a signal (including one that came since the last wait) or on cancellation. Cheaper than a wait with
    /// a timeout, which starts a timer task each time: for a consumer woken on every write.
    public func wait() async {
        await wait(orTimeout: nil)
    }

    private func wait(orTimeout timeout: Duration?) async {
        let id = state.withLock { state -> Int in
            state.waiterID += 1
            state.firedID = nil
            return state.waiterID
        }
        let timer = timeout.map { timeout in
            Task { [self] in
                try? await Task.sleep(for: timeout)
                end(id)
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || state.firedID == id {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            end(id)
        }
        timer?.cancel()
    }

    private func end(_ id: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.waiterID == id else { return nil }
            guard let waiter = state.waiter else {
                state.firedID = id
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }
}
