internal import Foundation
internal import HabitFlowLocking
public import HabitFlowRPC
internal import NIOCore
internal import NIOHTTP1
internal import NIOPosix
public import Prometheus

/// Prometheus metrics of one process: every RPC it serves by method and status code, with a latency histogram,
/// exposed as `GET /metrics` (text exposition format) on its own HTTP/1.1 port (DESIGN.md section 5).
public struct RPCMetricsInterceptor: ServerInterceptor {
    private let registry: PrometheusCollectorRegistry
    /// Fine below 10 ms, where the latency goals of Benchmarks/ lie: a share within a bound is exact, a quantile is
    /// interpolated within its bucket.
    private static let buckets: [Duration] = [
        .microseconds(250), .microseconds(500), .microseconds(750), .milliseconds(1), .milliseconds(1.5),
        .milliseconds(2), .milliseconds(3), .milliseconds(4), .milliseconds(5), .milliseconds(7.5), .milliseconds(10),
        .milliseconds(15), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]
    // Computed: MetricNameDescriptor is not Sendable, so it cannot be a stored static.
    private static var requests: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "habitflow", metricName: "rpc_server_handled", unitName: "total",
            helpText: "RPCs completed, by method and gRPC status code")
    }
    private static var latency: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "habitflow", metricName: "rpc_server_handling", unitName: "seconds",
            helpText: "RPC handling time, by method")
    }

    /// The series of each method and status code seen so far: the registry's lookup builds the series name and
    /// label strings and takes its lock on every call, which showed up in profiles of the gateway.
    private let series = SeriesCache()
    private final class SeriesCache: Sendable {
        let entries = Locked<[SeriesKey: Series]>([:])
    }
    private struct SeriesKey: Hashable {
        var path: String
        var code: RPCStatusCode
    }
    private struct Series: Sendable {
        var latency: DurationHistogram
        var requests: Counter
    }
    /// Methods × status codes stays small; the bound only guards against an unforeseen source of new paths.
    private static let maximumCachedSeries = 4096

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    public func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        let start = ContinuousClock.now
        var code = RPCStatusCode.ok
        defer { record(context.method, code: code, duration: ContinuousClock.now - start) }
        do {
            try await next()
        } catch {
            code = RPCStatusCode(endingWith: error)
            throw error
        }
    }

    /// Counts one finished call and its handling time: what ``intercept(context:next:)`` does around every call,
    /// for a server that measures its calls in its own interceptor (the gateway's, which does several jobs in one).
    public func record(_ method: MethodDescriptor, code: RPCStatusCode, duration: Duration) {
        let series = self.series(for: method, code: code)
        series.latency.record(duration)
        series.requests.increment()
    }

    private func series(for method: MethodDescriptor, code: RPCStatusCode) -> Series {
        let key = SeriesKey(path: method.path, code: code)
        if let known = series.entries.withLock({ $0[key] }) { return known }
        let labels = [("service", method.service), ("method", method.method)]
        let made = Series(
            latency: registry.makeDurationHistogram(descriptor: Self.latency, labels: labels, buckets: Self.buckets),
            requests: registry.makeCounter(descriptor: Self.requests, labels: labels + [("code", "\(code)")]))
        series.entries.withLock { cache in
            if cache.count < Self.maximumCachedSeries { cache[key] = made }
        }
        return made
    }
}

/// The outbox relay's view of each subscriber, as gauges: `habitflow_outbox_backlog{subscriber}` (deliveries not yet
/// done) and `habitflow_outbox_oldest_undelivered_seconds{subscriber}` (0 without backlog).
enum OutboxMetrics {
    // Computed: MetricNameDescriptor is not Sendable, so it cannot be a stored static.
    private static var backlog: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "habitflow", metricName: "outbox_backlog", unitName: "",
            helpText: "Outbox events not yet delivered, by subscriber")
    }
    private static var oldestUndelivered: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "habitflow", metricName: "outbox_oldest_undelivered", unitName: "seconds",
            helpText: "Age of the oldest outbox event not yet delivered, by subscriber (0 without backlog)")
    }

    /// For `OutboxRelay.Configuration.observe`.
    static func observer(
        registry: PrometheusCollectorRegistry
    ) -> @Sendable (_ subscriber: String, _ backlog: Int, _ oldestAge: Duration) -> Void {
        { subscriber, backlog, oldestAge in
            // The registry hands back the gauge it already has for a name and labels.
            let labels = [("subscriber", subscriber)]
            registry.makeGauge(descriptor: Self.backlog, labels: labels).set(Double(backlog))
            let seconds = Double(oldestAge.components.seconds) + Double(oldestAge.components.attoseconds) / 1e18
            registry.makeGauge(descriptor: Self.oldestUndelivered, labels: labels).set(seconds)
        }
    }
}

/// Serves the registry at `GET /metrics` over HTTP/1.1; anything else is 404.
public final class MetricsEndpoint: Sendable {
    private let channel: any Channel

    public static func start(host: String, port: Int, registry: PrometheusCollectorRegistry) async throws -> MetricsEndpoint {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(registry: registry))
                }
            }
            .bind(host: host, port: port).get()
        return MetricsEndpoint(channel: channel)
    }

    private init(channel: any Channel) {
        self.channel = channel
    }

    /// The port it listens on (the real one when started on port 0).
    public var port: Int? { channel.localAddress?.port }

    public func close() async {
        try? await channel.close()
    }
}

private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private var request: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let head = request else { return }
            request = nil
            let found = head.method == .GET && head.uri.split(separator: "?").first == "/metrics"
            let body = found ? registry.emitToBuffer() : Array("not found\n".utf8)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: found ? "text/plain; version=0.0.4" : "text/plain")
            headers.add(name: "content-length", value: String(body.count))
            if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
            let responseHead = HTTPResponseHead(version: head.version, status: found ? .ok : .notFound, headers: headers)
            context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            // Written in order: the close follows the flushed response.
            if !head.isKeepAlive { context.close(promise: nil) }
        }
    }
}
