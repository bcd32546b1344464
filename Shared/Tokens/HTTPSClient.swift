import Foundation
import HabitFlowTLS
import NIOCore
import NIOHTTP1
import NIOPosix

/// A minimal HTTP/1.1 GET over TLS, for fetching key sets: one request per connection, a whole-request deadline, a
/// cap on the body, and anything but `200 OK` is an error (redirects are not followed).
struct HTTPSGetClient: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    var trustRoots: TLSConfiguration.TrustRoots
    /// Covers connecting, the handshake, the request and reading the whole response.
    var timeout: Duration
    var maximumBodyBytes: Int
    var eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

    func get(_ url: URL) async throws(Failure) -> [UInt8] {
        guard url.scheme?.lowercased() == "https" else { throw Failure(description: "\(url) is not an https URL") }
        guard let host = url.host, !host.isEmpty else { throw Failure(description: "\(url) has no host") }
        let port = url.port ?? 443
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        var target = components?.percentEncodedPath ?? ""
        if target.isEmpty { target = "/" }
        if let query = components?.percentEncodedQuery { target += "?" + query }

        let context: TLSContext
        do {
            // ALPN http/1.1: a server that also speaks h2 must not pick it for this connection.
            let configuration = TLSConfiguration.client(serverName: host, trustRoots: trustRoots) {
                $0.applicationProtocols = ["http/1.1"]
            }
            context = try TLSContext(configuration: configuration)
        } catch {
            throw Failure(description: "TLS configuration: \(error)")
        }

        var requestHead = HTTPRequestHead(version: .http1_1, method: .GET, uri: target)
        requestHead.headers.add(name: "Host", value: url.port.map { "\(host):\($0)" } ?? host)
        requestHead.headers.add(name: "Accept", value: "application/json")
        requestHead.headers.add(name: "User-Agent", value: "HabitFlow")
        requestHead.headers.add(name: "Connection", value: "close")
        let head = requestHead

        let eventLoop = eventLoopGroup.next()
        let response = eventLoop.makePromise(of: [UInt8].self)
        let deadline = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            response.fail(Failure(description: "no complete response from \(host) within \(timeout)"))
        }
        let limit = maximumBodyBytes
        let connection = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(timeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(TLSHandler(context: context))
                    try pipeline.addHTTPClientHandlers()
                    try pipeline.addHandler(
                        ResponseCollector(request: head, maximumBodyBytes: limit, response: response))
                }
            }
            .connect(host: host, port: port)
        connection.whenComplete { result in
            switch result {
            case .success(let channel):
                // Whatever ends the request (the response, an error, the deadline) ends the connection.
                response.futureResult.whenComplete { _ in channel.close(promise: nil) }
            case .failure(let error):
                response.fail(Failure(description: "cannot connect to \(host):\(port): \(error)"))
            }
        }
        defer { deadline.cancel() }
        do {
            return try await response.futureResult.get()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "\(error)")
        }
    }
}

/// Sends the request once the connection is up and gathers the response body into `response`.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    private let maximumBodyBytes: Int
    private let response: EventLoopPromise<[UInt8]>
    private var body: [UInt8] = []
    private var status: HTTPResponseStatus?

    init(request: HTTPRequestHead, maximumBodyBytes: Int, response: EventLoopPromise<[UInt8]>) {
        self.request = request
        self.maximumBodyBytes = maximumBodyBytes
        self.response = response
    }

    func channelActive(context: ChannelHandlerContext) {
        // Written now and sent by the TLS handler once its handshake completes.
        context.write(wrapOutboundOut(.head(request)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
            guard head.status == .ok else {
                return fail(context: context, "HTTP status \(head.status.code) \(head.status.reasonPhrase)")
            }
            if let length = head.headers.first(name: "Content-Length").flatMap(Int.init), length > maximumBodyBytes {
                return fail(context: context, "response of \(length) bytes is larger than \(maximumBodyBytes)")
            }
        case .body(let buffer):
            guard status == .ok else { return }
            guard body.count + buffer.readableBytes <= maximumBodyBytes else {
                return fail(context: context, "response is larger than \(maximumBodyBytes) bytes")
            }
            body += buffer.readableBytesView
        case .end:
            if status == .ok { response.succeed(body) }
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context: context, "\(error)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        response.fail(HTTPSGetClient.Failure(description: "the connection closed before the response was complete"))
        context.fireChannelInactive()
    }

    private func fail(context: ChannelHandlerContext, _ reason: String) {
        // A promise completes once: later failures (the close that follows) are ignored.
        response.fail(HTTPSGetClient.Failure(description: reason))
        context.close(promise: nil)
    }
}
