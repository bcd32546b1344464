internal import Foundation

/// A latency for people: `850µs`, `1.23ms`, `12.3ms`, `245ms`, `1.50s`.
public func formatLatency(_ duration: Duration) -> String {
    let microseconds = duration.seconds * 1e6
    switch microseconds {
    case ..<1000: return String(format: "%.0fµs", microseconds)
    case ..<10_000: return String(format: "%.2fms", microseconds / 1000)
    case ..<100_000: return String(format: "%.1fms", microseconds / 1000)
    case ..<1_000_000: return String(format: "%.0fms", microseconds / 1000)
    default: return String(format: "%.2fs", microseconds / 1e6)
    }
}

func formatPercent(_ fraction: Double) -> String {
    let percent = fraction * 100
    if percent == 0 { return "0%" }
    if percent < 0.01 { return String(format: "%.4f%%", percent) }
    if percent < 1 { return String(format: "%.2f%%", percent) }
    return String(format: "%.1f%%", percent)
}

/// Milliseconds with microsecond precision, for JSON.
func milliseconds(_ duration: Duration) -> Double {
    (duration.seconds * 1e6).rounded() / 1000
}

/// Pads `text` on the left (numbers) or right (names) to `width` characters.
func padded(_ text: String, _ width: Int, left: Bool = true) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return left ? padding + text : text + padding
}
