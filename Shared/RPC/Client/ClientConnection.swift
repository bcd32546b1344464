internal import HabitFlowHTTP2
internal import HabitFlowLocking
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore
internal import NIOPosix

/// One HTTP/2 connection to a target, as the rest of the channel sees it (thread-safe).
final class ClientConnection: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<ClientConnectionHandler>
    let state: ClientConnectionState
    let target: RPCChannelConfiguration.Target

    private init(
        channel: any Channel, handler: NIOLoopBound<ClientConnectionHandler>, state: ClientConnectionState,
        target: RPCChannelConfiguration.Target
    ) {
        self.channel = channel
        self.handler = handler
        self.state = state
        self.target = target
    }

    var eventLoop: any EventLoop { channel.eventLoop }

    /// Whether new calls may go here (not closed, no GOAWAY received).
    var acceptsCalls: Bool { state.acceptsCalls }

    /// Opens the stream of one attempt (asynchronously, on the connection's event loop).
    func open(_ transport: ClientStreamTransport) {
        let handler = self.handler
        handler.eventLoop.executeOrRunNow { handler.value.open(transport) }
    }

    func close() {
        channel.close(promise: nil)
    }

    /// Connects (TCP, TLS with ALPN h2 when configured) and waits for the server's SETTINGS, all within the connect
    /// timeout. `onUnusable` runs once, with the identity of ``state``, when the connection stops taking calls
    /// (GOAWAY or closed).
    static func connect(
        to target: RPCChannelConfiguration.Target, configuration: RPCChannelConfiguration, tlsContext: TLSContext?,
        keepaliveInterval: KeepaliveInterval, eventLoop: any EventLoop, logger: Logger,
        onUnusable: @escaping @Sendable (ObjectIdentifier) -> Void
    ) -> EventLoopFuture<ClientConnection> {
        let readyPromise = eventLoop.makePromise(of: Void.self)
        let state = ClientConnectionState(onUnusable: onUnusable)
        var logger = logger
        logger[metadataKey: "target"] = "\(target)"
        let connectionLogger = logger
        // Name the server for certificate checks unless the configuration names it already.
        let serverName: String? =
            if let tls = configuration.tls, case .client(let client) = tls.role, client.serverName != nil {
                nil
            } else {
                target.host
            }

        let connected = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tlsContext {
                        try channel.pipeline.syncOperations.addHandler(
                            TLSHandler(context: tlsContext, serverName: serverName))
                    }
                    try channel.pipeline.syncOperations.addHandler(
                        ClientConnectionHandler(
                            configuration: configuration, target: target, logger: connectionLogger,
                            readyPromise: readyPromise, connectionState: state, keepaliveInterval: keepaliveInterval))
                }
            }
            .connect(host: target.host, port: target.port)

        return connected.flatMap { channel in
            let timeout = eventLoop.scheduleTask(in: TimeAmount(configuration.connectTimeout)) {
                readyPromise.fail(configuration.unavailable("timed out setting up HTTP/2 with \(target)"))
                channel.close(promise: nil)
            }
            return readyPromise.futureResult.flatMapThrowing {
                timeout.cancel()
                let handler = try channel.pipeline.syncOperations.handler(type: ClientConnectionHandler.self)
                return ClientConnection(
                    channel: channel, handler: NIOLoopBound(handler, eventLoop: eventLoop), state: state, target: target)
            }.flatMapErrorThrowing { error in
                timeout.cancel()
                channel.close(promise: nil)
                throw error
            }
        }.flatMapErrorThrowing { error in
            if let error = error as? RPCError { throw error }
            throw configuration.unavailable("could not connect to \(target): \(error)")
        }
    }
}

/// What other threads need to know about a connection: whether it takes calls, and how busy it is.
final class ClientConnectionState: Sendable {
    private struct State {
        var goingAway = false
        var closed = false
        var activeStreams = 0
        var onUnusable: (@Sendable (ObjectIdentifier) -> Void)?
    }

    private let state: Locked<State>

    init(onUnusable: @escaping @Sendable (ObjectIdentifier) -> Void) {
        state = Locked(State(onUnusable: onUnusable))
    }

    var acceptsCalls: Bool { state.withLock { !$0.goingAway && !$0.closed } }
    var activeStreams: Int { state.withLock { $0.activeStreams } }

    func setActiveStreams(_ count: Int) { state.withLock { $0.activeStreams = count } }

    func markGoingAway() {
        let callback = state.withLock { state in
            state.goingAway = true
            defer { state.onUnusable = nil }
            return state.onUnusable
        }
        callback?(ObjectIdentifier(self))
    }

    func markClosed() {
        let callback = state.withLock { state in
            state.closed = true
            defer { state.onUnusable = nil }
            return state.onUnusable
        }
        callback?(ObjectIdentifier(self))
    }
}

/// The keepalive interval of a channel: doubled each time a server answers `too_many_pings` (gRFC A8).
final class KeepaliveInterval: Sendable {
    private let interval: Locked<Duration>

    init(_ interval: Duration) {
        self.interval = Locked(interval)
    }

    var current: Duration { interval.withLock { $0 } }

    func double() -> Duration {
        interval.withLock { value in
            value = value * 2
            return value
        }
    }
}
