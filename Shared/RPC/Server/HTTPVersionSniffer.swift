internal import HabitFlowRPCWeb
internal import Logging
internal import NIOCore
internal import NIOHTTP1

/// With web protocols on (and no TLS), tells HTTP/2 clients from HTTP/1.1 ones by their first bytes: the HTTP/2
/// connection preface keeps the gRPC pipeline (``ServerConnectionHandler``); anything else gets NIO's HTTP/1.1
/// server pipeline and a ``HTTP1WebConnectionHandler``. Then it removes itself and passes the bytes on.
final class HTTPVersionSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let environment: ServerConnectionEnvironment
    private let web: WebConfiguration
    private var buffered: ByteBuffer?
    /// A client that sends too few bytes to tell (slowloris) is closed, as the HTTP/2 header timeout would.
    private var timeout: Scheduled<Void>?

    init(environment: ServerConnectionEnvironment, web: WebConfiguration) {
        self.environment = environment
        self.web = web
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let headerTimeout = environment.configuration.connectionManagement.headerTimeout else { return }
        let channel = context.channel
        timeout = context.eventLoop.scheduleTask(in: TimeAmount(headerTimeout)) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeout?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if buffered == nil {
            buffered = bytes
        } else {
            buffered!.writeBuffer(&bytes)
        }
        let received = buffered!.readableBytesView
        let compared = min(received.count, Self.preface.count)
        let http2: Bool
        if !received.prefix(compared).elementsEqual(Self.preface.prefix(compared)) {
            http2 = false
        } else if compared == Self.preface.count {
            http2 = true
        } else {
            return  // a prefix of the preface so far: wait for more
        }
        do {
            let pipeline = context.pipeline.syncOperations
            if http2 {
                try pipeline.addHandler(
                    ServerConnectionHandler(environment: environment, eventLoop: context.eventLoop),
                    position: .after(self))
            } else {
                let handler = HTTP1WebConnectionHandler(
                    router: environment.router, configuration: environment.configuration, web: web,
                    logger: environment.logger, eventLoop: context.eventLoop)
                try pipeline.configureHTTPServerPipeline(
                    position: .after(self), withPipeliningAssistance: true, withErrorHandling: true)
                // HTTP/2's idle timeout, for browsers' keep-alive connections too.
                if let idleTimeout = environment.configuration.connectionManagement.idleTimeout {
                    try pipeline.addHandler(IdleStateHandler(allTimeout: TimeAmount(idleTimeout)))
                }
                try pipeline.addHandler(handler)
            }
        } catch {
            environment.logger.error("could not set up the connection's pipeline", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        let first = buffered!
        buffered = nil
        context.fireChannelRead(wrapInboundOut(first))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Asked to shut down before the client said anything: nothing to finish.
        if event is ServerConnectionHandler.GracefulShutdownEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
