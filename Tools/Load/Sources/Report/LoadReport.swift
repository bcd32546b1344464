public import Foundation

/// The result file (`--json`): the run's settings, per-operation counts and percentiles, errors by status code,
/// throughput, the percentile curves and the thresholds. Durations are in milliseconds (keys ending in `Ms`).
public struct LoadReport: Codable, Sendable {
    public struct Latency: Codable, Sendable, Hashable {
        public var count: Int
        public var p50: Double
        public var p90: Double
        public var p99: Double
        public var p999: Double
        public var max: Double
        public var mean: Double

        init(_ summary: LatencySummary) {
            count = summary.count
            p50 = milliseconds(summary.p50)
            p90 = milliseconds(summary.p90)
            p99 = milliseconds(summary.p99)
            p999 = milliseconds(summary.p999)
            max = milliseconds(summary.max)
            mean = milliseconds(summary.mean)
        }
    }

    public struct Operation: Codable, Sendable {
        public var name: String
        public var weight: Int
        public var requests: Int
        public var succeeded: Int
        public var failed: Int
        public var ratePerSecond: Double
        /// Latency of successful requests from their intended send time (open loop: the schedule).
        public var latencyMs: Latency
        /// Latency of successful requests from when they were actually sent.
        public var serviceTimeMs: Latency
        public var errorsByCode: [String: Int]
        /// The first message seen per status code.
        public var errorExamples: [String: String]
        public var latencyDistribution: [PercentilePoint]

        init(_ operation: LoadMeasurement.Operation, in measurement: LoadMeasurement) {
            name = operation.name
            weight = operation.weight
            requests = operation.requests
            succeeded = operation.succeeded
            failed = operation.failed
            ratePerSecond = measurement.ratePerSecond(of: operation)
            latencyMs = Latency(operation.latency)
            serviceTimeMs = Latency(operation.serviceTime)
            errorsByCode = operation.failures
            errorExamples = operation.failureExamples
            latencyDistribution = operation.latencyCurve
        }
    }

    public struct Settings: Codable, Sendable {
        public var scenario: String
        public var target: String
        /// `closed-loop` or `open-loop`.
        public var pacing: String
        public var targetRatePerSecond: Double?
        public var users: Int
        public var connections: Int
        public var streamsPerConnection: Int
        public var durationSeconds: Double?
        public var requests: Int?
        public var warmUpSeconds: Double
        public var mix: [String: Int]
        public var seed: UInt64
    }

    public struct ThresholdResult: Codable, Sendable {
        public var threshold: String
        public var actual: String
        public var passed: Bool
    }

    public var tool = "habitflow-load"
    public var startedAt: Date
    public var settings: Settings
    public var measuredSeconds: Double
    public var stoppedEarly: Bool
    public var requests: Int
    public var succeeded: Int
    public var failed: Int
    /// Successful requests per second.
    public var throughputPerSecond: Double
    /// All requests (successful or not) per second.
    public var ratePerSecond: Double
    public var latencyMs: Latency
    public var serviceTimeMs: Latency
    public var errorsByCode: [String: Int]
    public var latencyDistribution: [PercentilePoint]
    public var operations: [Operation]
    public var thresholds: [ThresholdResult]
    /// Every threshold passed (true when none was given).
    public var passed: Bool

    public init(measurement: LoadMeasurement, target: String, startedAt: Date, outcomes: [ThresholdOutcome]) {
        let plan = measurement.plan
        let total = measurement.total
        var rate: Double?
        if case .openLoop(let ratePerSecond) = plan.pacing { rate = ratePerSecond }
        self.startedAt = startedAt
        settings = Settings(
            scenario: measurement.scenario, target: target, pacing: rate == nil ? "closed-loop" : "open-loop",
            targetRatePerSecond: rate, users: plan.users, connections: plan.connections,
            streamsPerConnection: plan.streamsPerConnection, durationSeconds: plan.duration?.seconds,
            requests: plan.requests, warmUpSeconds: plan.warmUp.seconds,
            mix: Dictionary(uniqueKeysWithValues: plan.mix.entries.map { ($0.operation, $0.weight) }), seed: plan.seed)
        measuredSeconds = measurement.measuredDuration.seconds
        stoppedEarly = measurement.stoppedEarly
        requests = total.requests
        succeeded = total.succeeded
        failed = total.failed
        throughputPerSecond = measurement.throughput
        ratePerSecond = measurement.ratePerSecond(of: total)
        latencyMs = Latency(total.latency)
        serviceTimeMs = Latency(total.serviceTime)
        errorsByCode = total.failures
        latencyDistribution = total.latencyCurve
        operations = measurement.operations.map { Operation($0, in: measurement) }
        thresholds = outcomes.map { ThresholdResult(threshold: $0.threshold.description, actual: $0.actual, passed: $0.passed) }
        passed = outcomes.allSatisfy(\.passed)
    }

    /// Pretty-printed JSON with ISO 8601 dates. (No snake_case key strategy: it would rewrite the status-code and
    /// operation names used as dictionary keys too.)
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    public static func decode(_ data: Data) throws -> LoadReport {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(LoadReport.self, from: data)
    }
}
