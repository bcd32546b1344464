/// The nearest-rank percentile of values sorted ascending: the smallest value with at least `fraction` of all at or
/// below it; `nil` without values.
public func nearestRank<Value>(_ sorted: [Value], _ fraction: Double) -> Value? {
    guard !sorted.isEmpty else { return nil }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[max(1, min(rank, sorted.count)) - 1]
}
