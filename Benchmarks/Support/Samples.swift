internal import Synchronization

/// Latencies in nanoseconds and error counts, merged from a measurement's workers.
public final class Samples: Sendable {
    private let state = Mutex<(latencies: [Int64], errors: Int)>(([], 0))

    public init() {}

    public func add(_ latencies: [Int64], errors: Int) {
        state.withLock {
            $0.latencies += latencies
            $0.errors += errors
        }
    }

    public var result: (latencies: [Int64], errors: Int) { state.withLock { $0 } }
}
