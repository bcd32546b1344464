import Foundation
import HabitFlowLoad
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

@Suite struct ScheduleAndMixTests {
    @Test func intendedSendTimesFollowTheRateWithoutDrift() {
        let schedule = OpenLoopSchedule(ratePerSecond: 1000)
        #expect(schedule.intendedOffset(ofRequest: 0) == .zero)
        #expect(schedule.intendedOffset(ofRequest: 1) == .milliseconds(1))
        #expect(schedule.intendedOffset(ofRequest: 1500) == .milliseconds(1500))
        // 3 per second: the offsets are computed from the index, so a million requests later there is no drift.
        let third = OpenLoopSchedule(ratePerSecond: 3)
        #expect(third.intendedOffset(ofRequest: 1) == .nanoseconds(333_333_333))
        #expect(third.intendedOffset(ofRequest: 3_000_000) == .seconds(1_000_000))
        #expect(schedule.requestCount(in: .seconds(2)) == 2000)
        #expect(schedule.requestCount(in: .milliseconds(2500)) == 2500)
        #expect(third.requestCount(in: .seconds(1)) == 3)
        #expect(third.requestCount(in: .milliseconds(1001)) == 4)
        #expect(schedule.requestCount(in: .zero) == 0)
    }

    @Test func mixParsingAndErrors() throws {
        let mix = try OperationMix(parsing: "mark-done=40, week-view=30,dashboard")
        #expect(mix.entries == [.init("mark-done", weight: 40), .init("week-view", weight: 30), .init("dashboard", weight: 1)])
        #expect(mix.totalWeight == 71)
        #expect(mix.description == "mark-done=40,week-view=30,dashboard=1")
        #expect(throws: MixError("weight 'x' of 'a' is not a whole number ≥ 0")) { try OperationMix(parsing: "a=x") }
        #expect(throws: MixError("operation 'a' appears twice in the mix")) { try OperationMix(parsing: "a=1,a=2") }
        #expect(throws: MixError("every weight in the mix is 0")) { try OperationMix(parsing: "a=0,b=0") }
        #expect(throws: MixError("empty entry in mix 'a=1,,b'")) { try OperationMix(parsing: "a=1,,b") }
    }

    @Test func weightedDrawsFollowTheWeights() throws {
        let mix = try OperationMix(parsing: "a=1,b=0,c=3")
        // Every draw maps to the entry whose cumulative weight it falls under; weight 0 is never drawn.
        #expect((0..<4).map(mix.entryIndex(forDraw:)) == [0, 2, 2, 2])
        var generator = SeededGenerator(seed: 42)
        var counts = [0, 0, 0]
        for _ in 0..<40_000 { counts[mix.pick(using: &generator)] += 1 }
        #expect(counts[1] == 0)
        #expect(abs(counts[0] - 10_000) < 500 && abs(counts[2] - 30_000) < 500, "\(counts)")
        // The same seed draws the same sequence.
        var first = SeededGenerator(seed: 7)
        var second = SeededGenerator(seed: 7)
        #expect((0..<20).map { _ in mix.pick(using: &first) } == (0..<20).map { _ in mix.pick(using: &second) })
    }

    @Test func durationsTargetsAndThresholdsParse() throws {
        #expect(try parseDuration("250us", bareNumbersAreSeconds: false) == .microseconds(250))
        #expect(try parseDuration("10ms", bareNumbersAreSeconds: false) == .milliseconds(10))
        #expect(try parseDuration("1.5s", bareNumbersAreSeconds: false) == .milliseconds(1500))
        #expect(try parseDuration("2m", bareNumbersAreSeconds: false) == .seconds(120))
        #expect(try parseDuration("30", bareNumbersAreSeconds: true) == .seconds(30))
        #expect(throws: OptionError("'10' needs a unit: for example 10ms or 10s")) {
            try parseDuration("10", bareNumbersAreSeconds: false)
        }
        #expect(throws: OptionError("'ten ms' is not a duration like 250us, 10ms, 1.5s or 2m")) {
            try parseDuration("ten ms", bareNumbersAreSeconds: true)
        }

        #expect(try RPCTarget(parsing: "127.0.0.1:7070") == RPCTarget(host: "127.0.0.1", port: 7070))
        #expect(try RPCTarget(parsing: "gateway") == RPCTarget(host: "gateway", port: 7070))
        #expect(try RPCTarget(parsing: "[::1]:9000") == RPCTarget(host: "::1", port: 9000))
        #expect(try RPCTarget(parsing: "[::1]:9000").description == "[::1]:9000")
        #expect(throws: OptionError("target 'localhost:99999': port '99999' is not a number from 1 to 65535")) {
            try RPCTarget(parsing: "localhost:99999")
        }
        #expect(throws: OptionError("target '::1': write an IPv6 address in brackets, like [::1]:7070")) {
            try RPCTarget(parsing: "::1")
        }

        let perOperation = try Threshold.maxLatency(.p99, parsing: "mark-done:10ms")
        #expect(perOperation == Threshold(.maxLatency(.p99, .milliseconds(10)), operation: "mark-done"))
        #expect(perOperation.description == "mark-done p99 ≤ 10.0ms")
        #expect(try Threshold.maxErrorRate(parsing: "0.5%") == Threshold(.maxErrorRate(0.005)))
        #expect(try Threshold.maxErrorRate(parsing: "0.01") == Threshold(.maxErrorRate(0.01)))
        #expect(try Threshold.minRate(parsing: "950") == Threshold(.minRate(950)))
        #expect(throws: OptionError("error rate '150%' is above 100%")) { try Threshold.maxErrorRate(parsing: "150%") }
        #expect(throws: OptionError("'5' needs a unit: for example 5ms or 5s")) { try Threshold.maxLatency(.p50, parsing: "5") }
    }
}

/// Percentiles, the summary, the JSON result and the SVG plot, from a measurement with known latencies.
@Suite struct ReportTests {
    /// `read`: 1, 2, ... 1000 ms, each once, and 10 UNAVAILABLE; `write & <check>`: 5 ms × 100.
    func knownMeasurement() -> LoadMeasurement {
        var read = OperationTally()
        for milliseconds in 1...1000 {
            read.recordSuccess(latency: .milliseconds(milliseconds), serviceTime: .milliseconds(milliseconds) / 2)
        }
        for _ in 0..<10 { read.recordFailure(code: "UNAVAILABLE", message: "connection reset") }
        var write = OperationTally()
        for _ in 0..<100 { write.recordSuccess(latency: .milliseconds(5), serviceTime: .milliseconds(4)) }
        var plan = LoadPlan(mix: .fixed(["read": 9, "write & <check>": 1]))
        plan.pacing = .openLoop(ratePerSecond: 111)
        plan.users = 5
        plan.duration = .seconds(10)
        return LoadMeasurement(
            plan: plan, scenario: "known", operations: [
                .init(name: "read", weight: 9, tally: read), .init(name: "write & <check>", weight: 1, tally: write),
            ], measuredDuration: .seconds(10))
    }

    @Test func percentilesComeFromTheHistogram() {
        let read = knownMeasurement().operations[0].latency
        // HDR histogram with 3 significant digits: each value within 0.1% of the exact percentile.
        func close(_ value: Duration, _ milliseconds: Double) -> Bool {
            abs(value.seconds * 1000 - milliseconds) <= milliseconds * 0.001 + 0.001
        }
        #expect(read.count == 1000)
        #expect(close(read.p50, 500), "\(read.p50)")
        #expect(close(read.p90, 900), "\(read.p90)")
        #expect(close(read.p99, 990), "\(read.p99)")
        #expect(close(read.p999, 999), "\(read.p999)")
        #expect(close(read.max, 1000), "\(read.max)")
        #expect(close(read.mean, 500.5), "\(read.mean)")
        let curve = knownMeasurement().operations[0].latencyCurve
        #expect(curve.first?.percentile == 0)
        #expect(curve.last?.percentile == 100)
        #expect(zip(curve, curve.dropFirst()).allSatisfy { $0.percentile < $1.percentile && $0.milliseconds <= $1.milliseconds })
    }

    @Test func summaryShowsOperationsErrorsThroughputAndThresholds() throws {
        let measurement = knownMeasurement()
        let outcomes = [
            try Threshold.maxLatency(.p99, parsing: "2s"), try Threshold.maxLatency(.p50, parsing: "read:100ms"),
            try Threshold.maxErrorRate(parsing: "1%"), try Threshold.minRate(parsing: "100"),
        ].map { $0.evaluate(measurement) }
        #expect(outcomes.map(\.passed) == [true, false, true, true])
        #expect(outcomes[1].actual == "500ms")
        #expect(outcomes[2].actual == "0.90%")
        let text = SummaryText.render(measurement, target: "127.0.0.1:7070", outcomes: outcomes)
        let lines = text.split(separator: "\n").map(String.init)
        let readRow = try #require(lines.first { $0.hasPrefix("read ") })
        #expect(readRow.split(separator: " ").map(String.init) == [
            "read", "9", "1010", "10", "101.0", "500ms", "900ms", "990ms", "999ms", "1.00s",
        ])
        let allRow = try #require(lines.first { $0.hasPrefix("all ") })
        #expect(allRow.split(separator: " ").prefix(4) == ["all", "1110", "10", "111.0"])
        #expect(text.contains("UNAVAILABLE"))
        #expect(text.contains("e.g. \"connection reset\""))
        #expect(text.contains("throughput: 110.0 successful req/s (1100 ok, 10 failed in 10.0 s)"))
        #expect(text.contains("coordinated omission corrected"))
        #expect(text.contains("FAIL  read p50 ≤ 100ms  (measured 500ms)"))
        #expect(SummaryText.progressLine(
            IntervalReport(elapsed: .seconds(3), interval: .seconds(1), succeeded: 990, failed: 10,
                           p50: .microseconds(1200), p99: .microseconds(4100), max: .microseconds(230_000),
                           warmingUp: true))
            == "[   3s]    1000.0 req/s  errors 10  p50 1.20ms  p99 4.10ms  max 230ms  (warm-up)")
    }

    @Test func jsonResultIsWellFormedAndComplete() throws {
        let measurement = knownMeasurement()
        let outcomes = [try Threshold.maxLatency(.p99, parsing: "10ms").evaluate(measurement)]
        let data = try LoadReport(
            measurement: measurement, target: "127.0.0.1:7070", startedAt: Date(timeIntervalSince1970: 1_800_000_000),
            outcomes: outcomes
        ).encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["startedAt"] as? String == "2027-01-15T08:00:00Z")
        #expect((object["errorsByCode"] as? [String: Int]) == ["UNAVAILABLE": 10])
        #expect(object["passed"] as? Bool == false)
        let report = try LoadReport.decode(data)
        #expect(report.settings.pacing == "open-loop")
        #expect(report.settings.targetRatePerSecond == 111)
        #expect(report.settings.mix == ["read": 9, "write & <check>": 1])
        #expect(report.requests == 1110 && report.succeeded == 1100 && report.failed == 10)
        #expect(abs(report.latencyMs.p999 - 999) < 1)
        #expect(report.operations.map(\.name) == ["read", "write & <check>"])
        #expect(abs(report.operations[1].latencyMs.p50 - 5) < 0.01)
        #expect(abs(report.operations[0].serviceTimeMs.max - 500) < 0.5)
        #expect(report.thresholds.map(\.threshold) == ["p99 ≤ 10.0ms"])
        #expect(!report.latencyDistribution.isEmpty)
    }

    @Test func svgPlotIsWellFormedWithOneCurvePerOperation() throws {
        let measurement = knownMeasurement()
        let outcomes = [
            try Threshold.maxLatency(.p99, parsing: "900ms").evaluate(measurement),
            try Threshold.maxLatency(.p99, parsing: "write & <check>:1h").evaluate(measurement),
        ]
        let svg = PercentilePlot.svg(for: measurement, target: "127.0.0.1:7070", outcomes: outcomes)
        let structure = try SVGStructure(svg)
        #expect(structure.root == "svg")
        #expect(structure.polylines == 3, "read, write and all")
        #expect(structure.texts.contains("write & <check>"))
        #expect(structure.texts.contains("99.9%"), "the log-scale percentile axis")
        #expect(structure.texts.contains("p99 ≤ 900ms"), "a limit within the axis is drawn")
        #expect(structure.texts.contains("write & <check> p99 ≤ 3600.00s (above the axis)"))
        // Every curve point lies inside the plot.
        #expect(structure.pointsOutsideViewBox == 0)

        let empty = PercentilePlot.svg(title: "t", subtitle: "s", series: [.init(name: "x", points: [])], sampleCount: 0)
        #expect(try SVGStructure(empty).texts.contains("no successful request"))
    }
}

/// What an XML parser finds in an SVG document (parsing fails on malformed XML).
struct SVGStructure {
    var root = ""
    var polylines = 0
    var texts: [String] = []
    var pointsOutsideViewBox = 0

    struct Malformed: Error { var line: Int }

    init(_ svg: String) throws {
        let delegate = Delegate()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = delegate
        guard parser.parse() else { throw Malformed(line: parser.lineNumber) }
        self = delegate.structure
    }

    final class Delegate: NSObject, XMLParserDelegate {
        var structure = SVGStructure(empty: ())
        var width = 0.0
        var height = 0.0
        var text: String?

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            if structure.root.isEmpty {
                structure.root = name
                width = Double(attributes["width"] ?? "") ?? 0
                height = Double(attributes["height"] ?? "") ?? 0
            }
            if name == "polyline" {
                structure.polylines += 1
                for pair in (attributes["points"] ?? "").split(separator: " ") {
                    let xy = pair.split(separator: ",").compactMap { Double($0) }
                    if xy.count != 2 || xy[0] < 0 || xy[0] > width || xy[1] < 0 || xy[1] > height {
                        structure.pointsOutsideViewBox += 1
                    }
                }
            }
            if name == "text" { text = "" }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text? += string }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if name == "text", let text {
                structure.texts.append(text)
                self.text = nil
            }
        }
    }

    private init(empty: Void) {}
}
