internal import Foundation

/// An SVG latency-by-percentile plot, drawn like HdrHistogram's plotter: the horizontal axis is the percentile on a
/// log scale of 1 / (1 − p) (0%, 90%, 99%, 99.9%... equally spaced), so the tail gets as much room as the median.
public enum PercentilePlot {
    public struct Series: Sendable {
        public var name: String
        public var points: [PercentilePoint]

        public init(name: String, points: [PercentilePoint]) {
            self.name = name
            self.points = points
        }
    }

    /// A horizontal dashed line: a latency limit.
    public struct Limit: Sendable {
        public var label: String
        public var milliseconds: Double
    }

    static let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

    /// The plot of a run: every operation, and all of them together in black.
    public static func svg(for measurement: LoadMeasurement, target: String, outcomes: [ThresholdOutcome]) -> String {
        var series = measurement.operations.map { Series(name: $0.name, points: $0.latencyCurve) }
        if measurement.operations.count > 1 { series.append(Series(name: "all", points: measurement.total.latencyCurve)) }
        let limits = outcomes.compactMap { outcome -> Limit? in
            guard case .maxLatency(_, let limit) = outcome.threshold.condition else { return nil }
            return Limit(label: outcome.threshold.description, milliseconds: milliseconds(limit))
        }
        var subtitle = SummaryText.headline(measurement, target: target)
        if case .openLoop = measurement.plan.pacing { subtitle += " · latency from intended send time" }
        return svg(
            title: "habitflow-load: latency by percentile", subtitle: subtitle, series: series, limits: limits,
            sampleCount: measurement.total.succeeded)
    }

    public static func svg(
        title: String, subtitle: String, series: [Series], limits: [Limit] = [], sampleCount: Int
    ) -> String {
        let width = 1020.0
        let left = 80.0
        let right = 270.0
        // The subtitle wraps at its " · " separators.
        let subtitleLines = wrap(subtitle, width: 120)
        let top = 58.0 + 16 * Double(subtitleLines.count)
        let bottom = 70.0
        let height = top + 440 + bottom
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom

        // Decades of the axis: enough for the samples there are (99.99% needs 10,000), at least 99%, at most 99.9999%.
        let decades = Double(min(6, max(2, Int(log10(Double(max(sampleCount, 1))).rounded(.up)))))
        // The axis fits the data; a limit far above it would squash the curves, so it is only listed.
        let highestValue = series.flatMap(\.points).map(\.milliseconds).max() ?? 0
        let drawnLimits = limits.filter { highestValue == 0 || $0.milliseconds <= highestValue * 2 }
        let listedLimits = limits.filter { limit in !drawnLimits.contains { $0.label == limit.label } }
        let (yMax, yStep) = niceAxis(max(highestValue, drawnLimits.map(\.milliseconds).max() ?? 0))

        func x(_ percentile: Double) -> Double {
            let remaining = 1 - percentile / 100
            let position = remaining <= 0 ? decades : min(decades, log10(1 / remaining))
            return left + position / decades * plotWidth
        }
        func y(_ milliseconds: Double) -> Double { top + plotHeight - milliseconds / yMax * plotHeight }
        func number(_ value: Double) -> String { String(format: "%.1f", value) }

        let legendX = left + plotWidth + 20
        var svg: [String] = []
        svg.append(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
                + "viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"Helvetica, Arial, sans-serif\" "
                + "font-size=\"12\">")
        svg.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
        svg.append("<text x=\"\(number(left))\" y=\"28\" font-size=\"17\" font-weight=\"bold\">\(escaped(title))</text>")
        for (index, line) in subtitleLines.enumerated() {
            svg.append(
                "<text x=\"\(number(left))\" y=\"\(48 + 16 * index)\" fill=\"#555\">\(escaped(line))</text>")
        }

        // Grid and axes.
        var tick = 0.0
        while tick <= yMax + yStep / 2 {
            let position = y(tick)
            svg.append(
                "<line x1=\"\(number(left))\" y1=\"\(number(position))\" x2=\"\(number(left + plotWidth))\" "
                    + "y2=\"\(number(position))\" stroke=\"#e4e4e4\"/>")
            svg.append(
                "<text x=\"\(number(left - 8))\" y=\"\(number(position + 4))\" text-anchor=\"end\">"
                    + "\(escaped(axisLabel(tick)))</text>")
            tick += yStep
        }
        for decade in 0...Int(decades) {
            let percentile = 100 * (1 - pow(10, -Double(decade)))
            let position = x(percentile)
            svg.append(
                "<line x1=\"\(number(position))\" y1=\"\(number(top))\" x2=\"\(number(position))\" "
                    + "y2=\"\(number(top + plotHeight))\" stroke=\"#e4e4e4\"/>")
            svg.append(
                "<text x=\"\(number(position))\" y=\"\(number(top + plotHeight + 18))\" text-anchor=\"middle\">"
                    + "\(percentileLabel(decade))</text>")
        }
        svg.append(
            "<rect x=\"\(number(left))\" y=\"\(number(top))\" width=\"\(number(plotWidth))\" "
                + "height=\"\(number(plotHeight))\" fill=\"none\" stroke=\"#444\"/>")
        svg.append(
            "<text x=\"\(number(left + plotWidth / 2))\" y=\"\(number(height - 22))\" text-anchor=\"middle\">"
                + "percentile (log scale of 1/(1−p))</text>")
        svg.append(
            "<text transform=\"translate(22 \(number(top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\">"
                + "latency (ms)</text>")

        for limit in drawnLimits {
            let position = y(limit.milliseconds)
            svg.append(
                "<line x1=\"\(number(left))\" y1=\"\(number(position))\" x2=\"\(number(left + plotWidth))\" "
                    + "y2=\"\(number(position))\" stroke=\"#b00\" stroke-dasharray=\"6 4\"/>")
            svg.append(
                "<text x=\"\(number(left + 6))\" y=\"\(number(position - 5))\" fill=\"#b00\">"
                    + "\(escaped(limit.label))</text>")
        }

        if series.allSatisfy(\.points.isEmpty) {
            svg.append(
                "<text x=\"\(number(left + plotWidth / 2))\" y=\"\(number(top + plotHeight / 2))\" "
                    + "text-anchor=\"middle\" font-size=\"16\" fill=\"#b00\">no successful request</text>")
        }

        for (index, line) in series.enumerated() where !line.points.isEmpty {
            let color = line.name == "all" ? "#000" : palette[index % palette.count]
            let coordinates = line.points.map { "\(number(x($0.percentile))),\(number(y($0.milliseconds)))" }
            svg.append(
                "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"\(line.name == "all" ? 2.5 : 1.8)\" "
                    + "points=\"\(coordinates.joined(separator: " "))\"/>")
            // Legend: name, then p50 / p99 / max read off the curve.
            let legendY = top + 10 + Double(index) * 40
            svg.append(
                "<line x1=\"\(number(legendX))\" y1=\"\(number(legendY))\" x2=\"\(number(legendX + 24))\" "
                    + "y2=\"\(number(legendY))\" stroke=\"\(color)\" stroke-width=\"3\"/>")
            svg.append("<text x=\"\(number(legendX + 32))\" y=\"\(number(legendY + 4))\">\(escaped(line.name))</text>")
            let summary = [("p50", 50.0), ("p99", 99.0), ("max", 100.0)].map { name, percentile in
                "\(name) \(compactLabel(value(at: percentile, in: line.points)))"
            }.joined(separator: "  ")
            svg.append(
                "<text x=\"\(number(legendX + 32))\" y=\"\(number(legendY + 19))\" fill=\"#555\" font-size=\"11\">"
                    + "\(escaped(summary))</text>")
        }
        for (index, limit) in listedLimits.enumerated() {
            let legendY = top + plotHeight - 10 - Double(listedLimits.count - 1 - index) * 18
            svg.append(
                "<text x=\"\(number(legendX))\" y=\"\(number(legendY))\" fill=\"#b00\" font-size=\"11\">"
                    + "\(escaped(limit.label)) (above the axis)</text>")
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    /// The latency at the first point of the curve at or above `percentile`.
    static func value(at percentile: Double, in points: [PercentilePoint]) -> Double {
        (points.first { $0.percentile >= percentile } ?? points.last)?.milliseconds ?? 0
    }

    /// An axis from 0 to a round value above `highest`, with 4 to 10 round steps.
    static func niceAxis(_ highest: Double) -> (maximum: Double, step: Double) {
        guard highest > 0 else { return (1, 0.2) }
        let rough = highest / 5
        let magnitude = pow(10, floor(log10(rough)))
        let step = [1.0, 2, 2.5, 5, 10].map { $0 * magnitude }.first { $0 >= rough } ?? 10 * magnitude
        return ((highest / step).rounded(.up) * step, step)
    }

    static func axisLabel(_ milliseconds: Double) -> String {
        if milliseconds == 0 { return "0" }
        if milliseconds >= 100 { return String(format: "%.0fms", milliseconds) }
        if milliseconds >= 1 { return String(format: "%gms", (milliseconds * 100).rounded() / 100) }
        return String(format: "%gms", (milliseconds * 1000).rounded() / 1000)
    }

    /// A legend value with three significant digits: `850µs`, `2.42ms`, `49.8ms`, `1.25s`.
    static func compactLabel(_ milliseconds: Double) -> String {
        formatLatency(.nanoseconds(Int64((milliseconds * 1e6).rounded())))
    }

    /// Splits `text` at " · " into lines of at most about `width` characters.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for part in text.components(separatedBy: " · ") {
            if current.isEmpty {
                current = part
            } else if current.count + 3 + part.count <= width {
                current += " · " + part
            } else {
                lines.append(current)
                current = part
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }

    static func percentileLabel(_ decade: Int) -> String {
        switch decade {
        case 0: "0%"
        case 1: "90%"
        case 2: "99%"
        default: "99." + String(repeating: "9", count: decade - 2) + "%"
        }
    }

    static func escaped(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }
}
