internal import Foundation
public import HabitFlowRPC
internal import NIOCore
internal import NIOHTTP1
internal import NIOPosix
public import Prometheus

/// Prometheus metrics of one process: every RPC it serves by method and status code, with a latency histogram,
/// exposed as `GET /metrics` (text exposition format) on its own HTTP/1.1 port (DESIGN.md section 5).
public struct RPCMetricsInterceptor: ServerInterceptor {
    private let registry: PrometheusCollectorRegistry
    private static let buckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
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

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    public func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        let start = ContinuousClock.now
        var code = RPCStatusCode.ok
        defer {
            let labels = [("service", context.method.service), ("method", context.method.method)]
            registry.makeDurationHistogram(descriptor: Self.latency, labels: labels, buckets: Self.buckets)
                .record(ContinuousClock.now - start)
            registry.makeCounter(descriptor: Self.requests, labels: labels + [("code", "\(code)")]).increment()
        }
        do {
            try await next()
        } catch {
            code = RPCStatusCode(endingWith: error)
            throw error
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
