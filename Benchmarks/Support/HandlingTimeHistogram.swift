import Foundation
import FoundationNetworking
public import HabitFlowRPC

/// One method's server-side latency as the service itself records it: the `habitflow_rpc_server_handling_seconds`
/// histogram of its `/metrics` endpoint (RPCMetricsInterceptor: from the handler's start, right after the request is
/// read, until its response is queued). The difference of two readings covers the calls in between, so a benchmark
/// reads it at the start and the end of its measured window.
///
/// Why: a closed-loop client on the same two cores as the service sees the service's time plus its own and the
/// kernel's queueing; the service's histogram is what an operator's dashboard shows as server latency.
public struct HandlingTimeHistogram: Sendable {
    /// Cumulative counts: calls that took at most `upperBound` seconds, by ascending bound; the last is +Inf.
    public var buckets: [(upperBound: Double, count: Double)]

    public var count: Double { buckets.last?.count ?? 0 }

    /// Parses the bucket lines of `method` out of a Prometheus text exposition (missing: an empty histogram).
    public init(exposition: String, method: MethodDescriptor) {
        let prefix = #"habitflow_rpc_server_handling_seconds_bucket{service="\#(method.service)",method="\#(method.method)",le=""#
        var buckets: [(upperBound: Double, count: Double)] = []
        for line in exposition.split(separator: "\n") where line.hasPrefix(prefix) {
            let rest = line.dropFirst(prefix.count)
            guard let quote = rest.firstIndex(of: "\""), let space = rest.lastIndex(of: " "),
                let count = Double(rest[rest.index(after: space)...])
            else { continue }
            let bound = rest[..<quote] == "+Inf" ? Double.infinity : Double(rest[..<quote]) ?? .nan
            buckets.append((bound, count))
        }
        self.buckets = buckets.filter { !$0.upperBound.isNaN }.sorted { $0.upperBound < $1.upperBound }
    }

    private init(buckets: [(upperBound: Double, count: Double)]) {
        self.buckets = buckets
    }

    /// The calls recorded after `earlier` was read.
    public func since(_ earlier: HandlingTimeHistogram) -> HandlingTimeHistogram {
        let before = Dictionary(earlier.buckets.map { ($0.upperBound, $0.count) }, uniquingKeysWith: { first, _ in first })
        return HandlingTimeHistogram(buckets: buckets.map { ($0.upperBound, $0.count - (before[$0.upperBound] ?? 0)) })
    }

    /// The `fraction` quantile in seconds, interpolated linearly inside its bucket as Prometheus's
    /// `histogram_quantile` does; `nil` without calls. Only as precise as the bucket bounds around it.
    public func quantile(_ fraction: Double) -> Double? {
        guard count > 0 else { return nil }
        let rank = fraction * count
        var lowerBound = 0.0
        var below = 0.0
        for (upperBound, cumulative) in buckets {
            if cumulative >= rank {
                // Past the last finite bound nothing can be interpolated: report that bound.
                guard upperBound.isFinite else { return lowerBound }
                let inBucket = cumulative - below
                return inBucket > 0 ? lowerBound + (upperBound - lowerBound) * (rank - below) / inBucket : upperBound
            }
            lowerBound = upperBound
            below = cumulative
        }
        return lowerBound
    }

    /// The exact share of calls that took at most `seconds`, when that is one of the bucket bounds (a goal such as
    /// "p99 under 5 ms" is then met when the share at 5 ms is at least 0.99, with no interpolation); `nil` otherwise.
    public func share(atMost seconds: Double) -> Double? {
        guard count > 0, let bucket = buckets.first(where: { abs($0.upperBound - seconds) < 1e-9 }) else { return nil }
        return bucket.count / count
    }
}

/// How many calls of one method a service has completed, from its `habitflow_rpc_server_handled_total` counters.
public struct ServiceMethodCounts: Sendable {
    public var succeeded: Double = 0
    /// Calls the client cancelled (h2load resets the streams still open when its duration ends).
    public var cancelled: Double = 0
    /// Calls that ended with any other status.
    public var failed: Double = 0


    public init(exposition: String, method: MethodDescriptor) {
        let prefix = #"habitflow_rpc_server_handled_total{service="\#(method.service)",method="\#(method.method)",code=""#
        for line in exposition.split(separator: "\n") where line.hasPrefix(prefix) {
            let rest = line.dropFirst(prefix.count)
            guard let quote = rest.firstIndex(of: "\""), let space = rest.lastIndex(of: " "),
                let count = Double(rest[rest.index(after: space)...])
            else { continue }
            switch rest[..<quote] {
            case "OK": succeeded += count
            case "CANCELLED": cancelled += count
            default: failed += count
            }
        }
    }
}

/// What a service's `/metrics` says about one method, from one `GET /metrics` (DESIGN.md section 5: its own HTTP/1.1
/// port on loopback): its handling-time histogram and its completed calls by outcome.
public struct ServiceMethodMetrics: Sendable {
    public var handlingTime: HandlingTimeHistogram
    public var counts: ServiceMethodCounts

    public static func read(metricsPort: Int, method: MethodDescriptor) async throws -> ServiceMethodMetrics {
        let (body, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(metricsPort)/metrics")!)
        let exposition = String(decoding: body, as: UTF8.self)
        return ServiceMethodMetrics(
            handlingTime: HandlingTimeHistogram(exposition: exposition, method: method),
            counts: ServiceMethodCounts(exposition: exposition, method: method))
    }

    /// The calls completed after `earlier` was read.
    public func since(_ earlier: ServiceMethodMetrics) -> ServiceMethodMetrics {
        var counts = self.counts
        counts.succeeded -= earlier.counts.succeeded
        counts.cancelled -= earlier.counts.cancelled
        counts.failed -= earlier.counts.failed
        return ServiceMethodMetrics(handlingTime: handlingTime.since(earlier.handlingTime), counts: counts)
    }
}
