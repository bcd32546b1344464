/// A pass/fail condition on a run, given on the command line (`--max-p99 10ms`, `--max-p99 mark-done:5ms`,
/// `--max-error-rate 0.1%`, `--min-rate 950`); a missed one makes the driver exit with status 1.
public struct Threshold: Sendable, Hashable, CustomStringConvertible {
    public enum Condition: Sendable, Hashable {
        /// The percentile of successful requests' latency is at most the limit.
        case maxLatency(ReportedPercentile, Duration)
        /// Failed requests ÷ all requests is at most this fraction (0...1).
        case maxErrorRate(Double)
        /// Requests that ended per second of the measured window is at least this.
        case minRate(Double)
    }

    public var condition: Condition
    /// The operation it applies to; `nil` for all of them together.
    public var operation: String?

    public init(_ condition: Condition, operation: String? = nil) {
        self.condition = condition
        self.operation = operation
    }

    /// Parses `[operation:]value` for one condition kind; `value` is parsed by `parseLimit`.
    static func parse(
        _ text: String, _ parseLimit: (String) throws(OptionError) -> Condition
    ) throws(OptionError) -> Threshold {
        let pieces = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        if pieces.count == 2 {
            let operation = pieces[0].trimmingWhitespace()
            guard !operation.isEmpty else { throw OptionError("'\(text)': the operation before ':' is empty") }
            return Threshold(try parseLimit(pieces[1].trimmingWhitespace()), operation: operation)
        }
        return Threshold(try parseLimit(text.trimmingWhitespace()))
    }

    public static func maxLatency(_ percentile: ReportedPercentile, parsing text: String) throws(OptionError) -> Threshold {
        try parse(text) { value throws(OptionError) in
            // A bare number is refused: "10" could mean seconds or milliseconds.
            .maxLatency(percentile, try parseDuration(value, bareNumbersAreSeconds: false))
        }
    }

    public static func maxErrorRate(parsing text: String) throws(OptionError) -> Threshold {
        try parse(text) { value throws(OptionError) in
            let isPercent = value.hasSuffix("%")
            guard let number = Double(isPercent ? String(value.dropLast()) : value), number >= 0 else {
                throw OptionError("error rate '\(value)' is not a number like 0.5% or 0.005")
            }
            let fraction = isPercent ? number / 100 : number
            guard fraction <= 1 else { throw OptionError("error rate '\(value)' is above 100%") }
            return .maxErrorRate(fraction)
        }
    }

    public static func minRate(parsing text: String) throws(OptionError) -> Threshold {
        try parse(text) { value throws(OptionError) in
            guard let rate = Double(value), rate > 0, rate.isFinite else {
                throw OptionError("rate '\(value)' is not a positive number of requests per second")
            }
            return .minRate(rate)
        }
    }

    public var description: String {
        let subject = operation.map { "\($0) " } ?? ""
        switch condition {
        case .maxLatency(let percentile, let limit): return "\(subject)\(percentile) ≤ \(formatLatency(limit))"
        case .maxErrorRate(let fraction): return "\(subject)error rate ≤ \(formatPercent(fraction))"
        case .minRate(let rate): return "\(subject)rate ≥ \(formatRate(rate)) req/s"
        }
    }

    /// Whether the run met it, with the measured value.
    public func evaluate(_ measurement: LoadMeasurement) -> ThresholdOutcome {
        let subject: LoadMeasurement.Operation
        if let operation {
            guard let found = measurement.operations.first(where: { $0.name == operation }) else {
                return ThresholdOutcome(threshold: self, actual: "operation not in the mix", passed: false)
            }
            subject = found
        } else {
            subject = measurement.total
        }
        switch condition {
        case .maxLatency(let percentile, let limit):
            guard subject.succeeded > 0 else {
                return ThresholdOutcome(threshold: self, actual: "no successful request", passed: false)
            }
            let value = subject.latency.value(of: percentile)
            return ThresholdOutcome(threshold: self, actual: formatLatency(value), passed: value <= limit)
        case .maxErrorRate(let limit):
            let rate = subject.requests == 0 ? 1 : Double(subject.failed) / Double(subject.requests)
            return ThresholdOutcome(threshold: self, actual: formatPercent(rate), passed: rate <= limit)
        case .minRate(let limit):
            let rate = measurement.ratePerSecond(of: subject)
            return ThresholdOutcome(threshold: self, actual: "\(String(format: "%.1f", rate)) req/s", passed: rate >= limit)
        }
    }
}

public struct ThresholdOutcome: Sendable, Hashable {
    public var threshold: Threshold
    /// The measured value, formatted.
    public var actual: String
    public var passed: Bool
}

/// A bad command-line value; the message says which and why.
public struct OptionError: Error, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Parses `250us`, `10ms`, `1.5s`, `2m`, `1h` (also `ns`, `µs`); a bare number is seconds when allowed.
public func parseDuration(_ text: String, bareNumbersAreSeconds: Bool) throws(OptionError) -> Duration {
    let trimmed = text.trimmingWhitespace()
    let units: [(suffix: String, seconds: Double)] = [
        ("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600),
    ]
    // Longest suffix first, so "ms" is not read as "m" + "s".
    for unit in units.sorted(by: { $0.suffix.count > $1.suffix.count }) where trimmed.hasSuffix(unit.suffix) {
        let number = trimmed.dropLast(unit.suffix.count)
        guard let value = Double(number), value >= 0, value.isFinite else {
            throw OptionError("'\(text)' is not a duration like 250us, 10ms, 1.5s or 2m")
        }
        return .nanoseconds(Int64((value * unit.seconds * 1e9).rounded()))
    }
    if let value = Double(trimmed), value >= 0, value.isFinite {
        guard bareNumbersAreSeconds else {
            throw OptionError("'\(text)' needs a unit: for example \(trimmed)ms or \(trimmed)s")
        }
        return .nanoseconds(Int64((value * 1e9).rounded()))
    }
    throw OptionError("'\(text)' is not a duration like 250us, 10ms, 1.5s or 2m")
}
