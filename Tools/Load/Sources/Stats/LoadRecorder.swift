internal import HabitFlowLocking
internal import Histogram

/// Latency histograms in microseconds, 3 significant digits, up to an hour (longer values count as an hour).
typealias LatencyHistogram = Histogram<UInt64>

extension Histogram where Count == UInt64 {
    static func latency() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    mutating func record(_ duration: Duration) {
        record(Swift.min(duration.microseconds, highestTrackableValue))
    }
}

/// Counts of one operation (or of the whole run): successes in histograms, failures by status code.
public struct OperationTally: Sendable {
    /// Time from when each request was meant to be sent (open loop: its scheduled time; closed loop: when its user
    /// wanted to send it) to its response.
    var latency = LatencyHistogram.latency()
    /// Time from when each request was actually handed to its connection to its response.
    var serviceTime = LatencyHistogram.latency()
    var failures: [String: Int] = [:]
    /// The first message seen for each failing status code, to say what went wrong.
    var failureExamples: [String: String] = [:]

    public init() {}

    public var succeeded: Int { Int(latency.totalCount) }
    public var failed: Int { failures.values.reduce(0, +) }

    /// One successful request: `latency` from its intended send time, `serviceTime` from its actual send.
    public mutating func recordSuccess(latency: Duration, serviceTime: Duration) {
        self.latency.record(latency)
        self.serviceTime.record(serviceTime)
    }

    /// One failed request, by status code name.
    public mutating func recordFailure(code: String, message: String) {
        failures[code, default: 0] += 1
        if failureExamples[code] == nil { failureExamples[code] = message }
    }

    mutating func add(_ other: OperationTally) {
        latency.add(other.latency)
        serviceTime.add(other.serviceTime)
        for (code, count) in other.failures { failures[code, default: 0] += count }
        for (code, message) in other.failureExamples where failureExamples[code] == nil {
            failureExamples[code] = message
        }
    }
}

/// What the progress line shows: the requests that ended in the last interval.
public struct IntervalReport: Sendable, Hashable {
    /// Seconds since the load started (warm-up included).
    public var elapsed: Duration
    public var interval: Duration
    public var succeeded: Int
    public var failed: Int
    public var p50: Duration
    public var p99: Duration
    /// The slowest request of the interval: a stall shows here before it moves the p99.
    public var max: Duration
    public var warmingUp: Bool

    public init(
        elapsed: Duration, interval: Duration, succeeded: Int, failed: Int, p50: Duration, p99: Duration,
        max: Duration, warmingUp: Bool
    ) {
        self.elapsed = elapsed
        self.interval = interval
        self.succeeded = succeeded
        self.failed = failed
        self.p50 = p50
        self.p99 = p99
        self.max = max
        self.warmingUp = warmingUp
    }

    public var ratePerSecond: Double {
        interval > .zero ? Double(succeeded + failed) / interval.seconds : 0
    }
}

/// Where every finished request is recorded, from many tasks at once.
///
/// Measured requests go to per-operation tallies; every request (warm-up included) also goes to the current
/// interval, which the progress line takes once a second.
final class LoadRecorder: Sendable {
    private struct State {
        var operations: [OperationTally]
        var interval = OperationTally()
        var intervalStart: ContinuousClock.Instant
        /// When the last measured request ended.
        var lastMeasuredCompletion: ContinuousClock.Instant?
    }

    private let state: Locked<State>

    init(operationCount: Int, start: ContinuousClock.Instant) {
        state = Locked(State(operations: Array(repeating: OperationTally(), count: operationCount), intervalStart: start))
    }

    func recordSuccess(
        operation: Int, latency: Duration, serviceTime: Duration, measured: Bool, at completion: ContinuousClock.Instant
    ) {
        state.withLock { state in
            state.interval.latency.record(latency)
            guard measured else { return }
            state.operations[operation].recordSuccess(latency: latency, serviceTime: serviceTime)
            state.lastMeasuredCompletion = max(state.lastMeasuredCompletion ?? completion, completion)
        }
    }

    func recordFailure(
        operation: Int, code: String, message: String, measured: Bool, at completion: ContinuousClock.Instant
    ) {
        state.withLock { state in
            state.interval.recordFailure(code: code, message: message)
            guard measured else { return }
            state.operations[operation].recordFailure(code: code, message: message)
            state.lastMeasuredCompletion = max(state.lastMeasuredCompletion ?? completion, completion)
        }
    }

    /// The requests that ended since the last call, and starts a new interval.
    /// The interval counts as warm-up when it began before `measureStart`.
    func takeInterval(
        now: ContinuousClock.Instant, loadStart: ContinuousClock.Instant, measureStart: ContinuousClock.Instant
    ) -> IntervalReport {
        state.withLock { state in
            let warmingUp = state.intervalStart < measureStart
            let tally = state.interval
            let report = IntervalReport(
                elapsed: now - loadStart, interval: now - state.intervalStart, succeeded: tally.succeeded,
                failed: tally.failed, p50: .microseconds(tally.latency.valueAtPercentile(50)),
                p99: .microseconds(tally.latency.valueAtPercentile(99)), max: .microseconds(tally.latency.max),
                warmingUp: warmingUp)
            state.interval.latency.reset()
            state.interval.failures.removeAll(keepingCapacity: true)
            state.intervalStart = now
            return report
        }
    }

    /// The measured tallies, per operation, and when the last measured request ended.
    func finish() -> (operations: [OperationTally], lastCompletion: ContinuousClock.Instant?) {
        state.withLock { ($0.operations, $0.lastMeasuredCompletion) }
    }
}
