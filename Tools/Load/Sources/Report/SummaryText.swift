internal import Foundation

/// The end-of-run summary a person reads: per-operation counts and percentiles, errors by status code,
/// throughput and thresholds.
public enum SummaryText {
    public static func render(
        _ measurement: LoadMeasurement, target: String, outcomes: [ThresholdOutcome]
    ) -> String {
        let plan = measurement.plan
        var lines: [String] = []
        lines.append(headline(measurement, target: target))
        if measurement.stoppedEarly { lines.append("stopped early: the figures cover the load until the stop") }
        lines.append("")

        let columns = ["weight", "requests", "errors", "rate/s"] + ReportedPercentile.allCases.map(\.description)
        let nameWidth = max(12, measurement.operations.map(\.name.count).max() ?? 0) + 2
        lines.append(padded("operation", nameWidth, left: false) + columns.map { padded($0, 10) }.joined())
        let rows = measurement.operations.map { ($0, String($0.weight)) } + [(measurement.total, "")]
        for (operation, weight) in rows {
            let latency = operation.latency
            var cells = [
                weight, String(operation.requests), String(operation.failed),
                String(format: "%.1f", measurement.ratePerSecond(of: operation)),
            ]
            cells += ReportedPercentile.allCases.map { percentile in
                latency.count == 0 ? "-" : formatLatency(latency.value(of: percentile))
            }
            lines.append(padded(operation.name, nameWidth, left: false) + cells.map { padded($0, 10) }.joined())
        }
        lines.append("")

        let total = measurement.total
        if total.failures.isEmpty {
            lines.append("errors: none")
        } else {
            lines.append("errors by status code:")
            for (code, count) in total.failures.sorted(by: { ($0.value, $1.key) > ($1.value, $0.key) }) {
                let example = total.failureExamples[code].map { "  e.g. \"\(shortened($0))\"" } ?? ""
                lines.append("  " + padded(code, 20, left: false) + padded(String(count), 8) + example)
            }
        }
        lines.append(
            "throughput: \(String(format: "%.1f", measurement.throughput)) successful req/s (\(total.succeeded) ok, "
                + "\(total.failed) failed in \(String(format: "%.1f", measurement.measuredDuration.seconds)) s)")

        let service = total.serviceTime
        switch plan.pacing {
        case .openLoop:
            lines.append(
                "latency counts from each request's intended send time on the fixed schedule (coordinated omission "
                    + "corrected)")
            if service.count > 0 {
                lines.append(
                    "service time, from the actual send: p50 \(formatLatency(service.p50))  p99 "
                        + "\(formatLatency(service.p99))  p99.9 \(formatLatency(service.p999))  max "
                        + "\(formatLatency(service.max))")
            }
        case .closedLoop:
            lines.append(
                "closed loop: latency is each request's own time; a stalled server also delays sending, so use "
                    + "--rate for latency figures")
        }

        if !outcomes.isEmpty {
            lines.append("thresholds:")
            for outcome in outcomes {
                lines.append("  \(outcome.passed ? "pass" : "FAIL")  \(outcome.threshold)  (measured \(outcome.actual))")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func headline(_ measurement: LoadMeasurement, target: String) -> String {
        headline(plan: measurement.plan, scenario: measurement.scenario, target: target)
    }

    /// `scenario mixed against 127.0.0.1:7070 · open loop at 1000 req/s · 1000 users · ...`
    static func headline(plan: LoadPlan, scenario: String, target: String) -> String {
        var parts = [
            "scenario \(scenario) against \(target)", plan.pacing.description,
            "\(plan.users) user\(plan.users == 1 ? "" : "s")",
            "\(plan.connections) connection\(plan.connections == 1 ? "" : "s") × \(plan.streamsPerConnection) streams",
        ]
        var bound: [String] = []
        if let duration = plan.duration { bound.append("\(formatSeconds(duration))") }
        if let requests = plan.requests { bound.append("\(requests) requests") }
        parts.append(bound.joined(separator: " or ") + (plan.warmUp > .zero ? " after \(formatSeconds(plan.warmUp)) warm-up" : ""))
        return parts.joined(separator: " · ")
    }

    /// One progress line: `[  5s] 1000.0 req/s  errors 0  p50 1.20ms  p99 4.10ms`.
    public static func progressLine(_ report: IntervalReport) -> String {
        let seconds = Int(report.elapsed.seconds.rounded())
        var line = "[\(padded(String(seconds), 4))s] \(padded(String(format: "%.1f", report.ratePerSecond), 9)) req/s"
        line += "  errors \(report.failed)"
        if report.succeeded > 0 {
            line += "  p50 \(formatLatency(report.p50))  p99 \(formatLatency(report.p99))  max \(formatLatency(report.max))"
        }
        if report.warmingUp { line += "  (warm-up)" }
        return line
    }

    private static func shortened(_ message: String) -> String {
        let flat = message.replacingOccurrences(of: "\n", with: " ")
        return flat.count > 100 ? String(flat.prefix(97)) + "..." : flat
    }
}
