internal import Histogram

/// Latency percentiles of a set of requests (HDR histogram, 3 significant digits).
public struct LatencySummary: Sendable, Hashable {
    public var count: Int
    public var p50: Duration
    public var p90: Duration
    public var p99: Duration
    public var p999: Duration
    public var max: Duration
    public var mean: Duration

    init(_ histogram: LatencyHistogram) {
        count = Int(histogram.totalCount)
        p50 = .microseconds(histogram.valueAtPercentile(50))
        p90 = .microseconds(histogram.valueAtPercentile(90))
        p99 = .microseconds(histogram.valueAtPercentile(99))
        p999 = .microseconds(histogram.valueAtPercentile(99.9))
        max = .microseconds(histogram.maxRecorded)
        mean = count == 0 ? .zero : .nanoseconds(Int64((histogram.mean * 1000).rounded()))
    }

    /// The value of one of the reported percentiles.
    public func value(of percentile: ReportedPercentile) -> Duration {
        switch percentile {
        case .p50: p50
        case .p90: p90
        case .p99: p99
        case .p999: p999
        case .max: max
        }
    }
}

/// The percentiles every report shows.
public enum ReportedPercentile: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case p50, p90, p99, p999, max

    public var description: String {
        switch self {
        case .p50: "p50"
        case .p90: "p90"
        case .p99: "p99"
        case .p999: "p99.9"
        case .max: "max"
        }
    }
}

/// One point of a latency-by-percentile curve (HdrHistogram's percentile distribution).
public struct PercentilePoint: Sendable, Hashable, Codable {
    /// 0 to 100.
    public var percentile: Double
    public var milliseconds: Double
}

/// What a run measured (warm-up excluded): per operation and in total.
public struct LoadMeasurement: Sendable {
    public struct Operation: Sendable {
        public let name: String
        public let weight: Int
        public let tally: OperationTally

        public init(name: String, weight: Int, tally: OperationTally) {
            self.name = name
            self.weight = weight
            self.tally = tally
        }

        public var succeeded: Int { tally.succeeded }
        public var failed: Int { tally.failed }
        public var requests: Int { succeeded + failed }
        /// Failed requests by gRPC status code name (`UNAVAILABLE`...), plus `CLIENT_CHECK`/`CLIENT_ERROR` for
        /// failures on the driver's side.
        public var failures: [String: Int] { tally.failures }
        public var failureExamples: [String: String] { tally.failureExamples }
        /// Latency of the successful requests, from their intended send time.
        public var latency: LatencySummary { LatencySummary(tally.latency) }
        /// Latency of the successful requests, from when they were actually sent.
        public var serviceTime: LatencySummary { LatencySummary(tally.serviceTime) }
        public var latencyCurve: [PercentilePoint] { percentileCurve(of: tally.latency) }
        public var serviceTimeCurve: [PercentilePoint] { percentileCurve(of: tally.serviceTime) }
    }

    public let plan: LoadPlan
    public let scenario: String
    /// One per entry of the plan's mix, in its order.
    public let operations: [Operation]
    /// From the end of the warm-up to the last measured response.
    public let measuredDuration: Duration
    /// Stopped before its planned end (Ctrl-C).
    public let stoppedEarly: Bool

    public init(
        plan: LoadPlan, scenario: String, operations: [Operation], measuredDuration: Duration, stoppedEarly: Bool = false
    ) {
        self.plan = plan
        self.scenario = scenario
        self.operations = operations
        self.measuredDuration = measuredDuration
        self.stoppedEarly = stoppedEarly
    }

    /// Every operation together.
    public var total: Operation {
        var tally = OperationTally()
        for operation in operations { tally.add(operation.tally) }
        return Operation(name: "all", weight: plan.mix.totalWeight, tally: tally)
    }

    /// Requests that ended (successfully or not) per second of the measured window.
    public func ratePerSecond(of operation: Operation) -> Double {
        measuredDuration > .zero ? Double(operation.requests) / measuredDuration.seconds : 0
    }

    /// Successful requests per second of the measured window.
    public var throughput: Double {
        measuredDuration > .zero ? Double(total.succeeded) / measuredDuration.seconds : 0
    }
}

/// The histogram's percentile distribution (5 ticks per half distance to 100%, as HdrHistogram prints it).
func percentileCurve(of histogram: LatencyHistogram) -> [PercentilePoint] {
    guard histogram.totalCount > 0 else { return [] }
    var points: [PercentilePoint] = []
    for step in histogram.percentiles(ticksPerHalfDistance: 5) {
        let point = PercentilePoint(
            percentile: step.percentileLevelIteratedTo, milliseconds: Double(step.value) / 1000)
        if points.last != point { points.append(point) }
    }
    return points
}
