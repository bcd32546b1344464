internal import HabitFlowLocking
public import HabitFlowRPC
internal import HabitFlowTLS
public import Logging
public import NIOCore
public import NIOPosix

/// The routing table of a server: every method of every registered service by `:path`, the fast paths of the
/// unary methods that have one (``UnaryForwardingService``), and the interceptors.
struct RPCRouter: Sendable {
    let methods: [String: ServerMethod]
    let unaryForwarders: [String: any UnaryCallForwarder]
    let interceptors: [any ServerInterceptor]
}

/// What every connection of one server reads and never changes, made once per server: a connection holds a
/// reference to it instead of its own copy of the configuration and logger (at 10,000 connections, 10,000 copies).
final class ServerConnectionEnvironment: Sendable {
    let router: RPCRouter
    let configuration: RPCServerConfiguration
    let logger: Logger

    init(router: RPCRouter, configuration: RPCServerConfiguration, logger: Logger) {
        self.router = router
        self.configuration = configuration
        self.logger = logger
    }
}

/// A gRPC server: SwiftNIO accepts connections, each served by an nghttp2 session (h2c, or TLS with ALPN h2); with
/// ``RPCServerConfiguration/web`` also gRPC-Web and Connect calls, over HTTP/2 and (without TLS) HTTP/1.1.
///
/// ```swift
/// let server = RPCServer(configuration: .init(port: 7072), services: [HabitsService(...), HealthService(...)], logger: logger)
/// try await server.start()
/// ...
/// await server.shutdown()  // GOAWAY, in-flight calls finish within the grace period, then close
/// ```
public final class RPCServer: Sendable {
    public let configuration: RPCServerConfiguration
    private let connectionEnvironment: ServerConnectionEnvironment
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = Locked(State())

    private struct State {
        var listener: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var shuttingDown = false
    }

    /// - Parameters:
    ///   - services: the services to route to; two services with the same method path are a programming error.
    ///   - interceptors: wrap every call, the first outermost.
    public init(
        configuration: RPCServerConfiguration,
        services: [any RPCService],
        interceptors: [any ServerInterceptor] = [],
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) {
        var methods: [String: ServerMethod] = [:]
        var unaryForwarders: [String: any UnaryCallForwarder] = [:]
        for service in services {
            for method in service.methods {
                precondition(methods[method.descriptor.path] == nil, "\(method.descriptor.path) is registered twice")
                methods[method.descriptor.path] = method
                if method.kind == .unary, let forwarder = (service as? any UnaryForwardingService)?.unaryForwarder(for: method) {
                    unaryForwarders[method.descriptor.path] = forwarder
                }
            }
        }
        self.configuration = configuration
        self.connectionEnvironment = ServerConnectionEnvironment(
            router: RPCRouter(methods: methods, unaryForwarders: unaryForwarders, interceptors: interceptors),
            configuration: configuration, logger: logger)
        self.group = group
        self.logger = logger
    }

    /// The address the server listens on, once started (with the real port when configured with port 0).
    public var localAddress: SocketAddress? {
        state.withLock { $0.listener?.localAddress }
    }

    /// Binds and starts accepting connections.
    public func start() async throws {
        let tlsContext = try configuration.tls.map { try TLSContext(configuration: $0) }
        let environment = connectionEnvironment
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            // A channel keeps its last receive buffer for the next read; NIO's first is 2 KiB, which most connections
            // (a client's preface, then requests of a few hundred bytes) never fill: start at 512 bytes, grown as
            // reads fill it.
            .childChannelOption(
                .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536))
            .childChannelInitializer { [weak self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try Self.addHandlers(to: channel, tlsContext: tlsContext, environment: environment)
                    self?.track(channel)
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        state.withLock { $0.listener = channel }
        logger.info("listening", metadata: ["address": "\(channel.localAddress.map { "\($0)" } ?? "?")"])
    }

    /// Serves a connection that did not come from the listener, as an accepted one is served: on the channel's
    /// event loop, TLS first when configured, then gRPC over HTTP/2. For an `EmbeddedChannel` fed bytes by hand (the
    /// HTTP/2 fuzz target in Tools/Fuzz); such a channel is not among the connections ``shutdown()`` closes.
    ///
    /// - Important: Call it on `channel`'s event loop.
    public func serve(_ channel: any Channel) throws {
        let tlsContext = try configuration.tls.map { try TLSContext(configuration: $0) }
        try Self.addHandlers(to: channel, tlsContext: tlsContext, environment: connectionEnvironment)
    }

    private static func addHandlers(
        to channel: any Channel, tlsContext: TLSContext?, environment: ServerConnectionEnvironment
    ) throws {
        if let tlsContext {
            try channel.pipeline.syncOperations.addHandler(TLSHandler(context: tlsContext))
        } else if let web = environment.configuration.web {
            // HTTP/1.1 next to HTTP/2 on the same port, for browsers on plaintext localhost.
            try channel.pipeline.syncOperations.addHandler(HTTPVersionSniffer(environment: environment, web: web))
            return
        }
        try channel.pipeline.syncOperations.addHandler(
            ServerConnectionHandler(environment: environment, eventLoop: channel.eventLoop))
    }

    /// Runs until ``shutdown()`` completes (starting first if needed).
    public func run() async throws {
        if localAddress == nil { try await start() }
        let listener = state.withLock { $0.listener }
        try await listener?.closeFuture.get()
        while !state.withLock({ $0.connections.isEmpty }) {
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Stops accepting, asks every connection to finish its calls (GOAWAY), and returns when all are closed, at
    /// the latest after the grace period plus a second.
    public func shutdown() async {
        let (listener, connections) = state.withLock { state in
            state.shuttingDown = true
            return (state.listener, Array(state.connections.values))
        }
        try? await listener?.close()
        for connection in connections {
            connection.pipeline.fireUserInboundEventTriggered(ServerConnectionHandler.GracefulShutdownEvent())
        }
        let deadline = ContinuousClock.now + configuration.connectionManagement.gracePeriod + .seconds(1)
        for connection in connections {
            let remaining = deadline - .now
            guard remaining > .zero else { break }
            _ = try? await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await connection.closeFuture.get() }
                group.addTask { try await Task.sleep(for: remaining) }
                try await group.next()
                group.cancelAll()
            }
        }
        for connection in state.withLock({ Array($0.connections.values) }) {
            try? await connection.close()
        }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let shuttingDown = state.withLock { state in
            state.connections[id] = channel
            return state.shuttingDown
        }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.state.withLock { $0.connections.removeValue(forKey: id) }
        }
        if shuttingDown {
            channel.pipeline.fireUserInboundEventTriggered(ServerConnectionHandler.GracefulShutdownEvent())
        }
    }
}
