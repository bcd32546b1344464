internal import HabitFlowLocking

/// A pool of values handed out first-come, first-served: ``take()`` suspends while the pool is empty.
///
/// The engine keeps its idle virtual users in one, and the free stream slots of each connection in another (a
/// pool of `Void` is a counting semaphore).
///
/// - Important: ``take()`` cannot be cancelled; a value must come back for every waiter. The engine only waits
///   for values held by requests in flight, which end by themselves (every call has a deadline).
final class AsyncPool<Element: Sendable>: Sendable {
    private struct State {
        /// Idle values, oldest first: every user gets its turn, not only the few that came back last.
        var available: FIFO<Element>
        var waiters = FIFO<CheckedContinuation<Element, Never>>()
    }

    private let state: Locked<State>

    init(_ elements: [Element]) {
        state = Locked(State(available: FIFO(elements)))
    }

    /// A value from the pool; waits for one to be put back when the pool is empty.
    func take() async -> Element {
        if let element = state.withLock({ $0.available.popFirst() }) { return element }
        return await withCheckedContinuation { continuation in
            let element = state.withLock { state -> Element? in
                // Put back between the check above and now: take it rather than wait.
                if let element = state.available.popFirst() { return element }
                state.waiters.append(continuation)
                return nil
            }
            if let element { continuation.resume(returning: element) }
        }
    }

    /// Returns a value: to the longest waiter, or into the pool.
    func put(_ element: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Element, Never>? in
            if let waiter = state.waiters.popFirst() { return waiter }
            state.available.append(element)
            return nil
        }
        waiter?.resume(returning: element)
    }

    /// Takes every value now in the pool.
    func drain() -> [Element] {
        state.withLock { state in
            var elements: [Element] = []
            while let element = state.available.popFirst() { elements.append(element) }
            return elements
        }
    }
}

/// A first-in, first-out queue on an array: pops advance an index, and the array is compacted when half is dead.
struct FIFO<Element> {
    private var storage: [Element?]
    private var head = 0

    init(_ elements: [Element] = []) {
        storage = elements
    }

    var isEmpty: Bool { head == storage.count }

    mutating func append(_ element: Element) { storage.append(element) }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        storage[head] = nil
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }
}
