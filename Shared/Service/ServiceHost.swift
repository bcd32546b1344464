public import HabitFlowInternalCredential
internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowGRPCSideServiceProtos
internal import HabitFlowOutbox
public import HabitFlowPostgres
public import HabitFlowRPC
public import HabitFlowRPCClient
public import HabitFlowRPCServer
public import ServiceLifecycle
public import HabitFlowRPCSideServices
public import Logging
public import Prometheus
internal import HabitFlowLocking
internal import HabitFlowCrypto

/// What makes one service: its name (schema, role, migrations folder), its API descriptors for reflection, the
/// events its outbox publishes and to whom, and how to build what it serves from the runtime.
///
/// ```swift
/// let definition = ServiceDefinition(name: "habits", descriptorSets: [HabitFlowHabitsProtosDescriptorSet.base64],
///                                    eventRoutes: ["habitflow.events.v1.HabitDeleted": ["goals"]]) { runtime in
///     [HabitsService(pool: runtime.pool), ...]
/// }
/// await ServiceMain.run(definition)  // or, in tests, try await ServiceHost.start(definition, configuration: ..., logger: ...)
/// ```
public struct ServiceDefinition: Sendable {
    public var name: String
    /// Base64 `FileDescriptorSet`s of the services' protos (the generated `…DescriptorSet.base64`), for reflection.
    public var descriptorSets: [String]
    /// Subscribers of each event type the outbox carries, by service name; empty when the service publishes nothing
    /// (then no relay runs). A type listed with no subscribers is relayed to no one: it leaves the outbox.
    public var eventRoutes: [String: [String]]
    /// Reflection then also removes every service it does not serve from the files it shows: for a process whose
    /// `.proto` files declare services it must not reveal (the gateway and the internal services).
    public var reflectionHidesUnservedServices: Bool
    public var makeParts: @Sendable (ServiceRuntime) async throws -> ServiceParts

    /// A service that serves `makeServices` behind the standard interceptors.
    public init(
        name: String, descriptorSets: [String] = [], eventRoutes: [String: [String]] = [:],
        makeServices: @escaping @Sendable (ServiceRuntime) async throws -> [any RPCService]
    ) {
        self.init(name: name, descriptorSets: descriptorSets, eventRoutes: eventRoutes) { runtime in
            ServiceParts(services: try await makeServices(runtime))
        }
    }

    public init(
        name: String, descriptorSets: [String] = [], eventRoutes: [String: [String]] = [:],
        reflectionHidesUnservedServices: Bool = false,
        makeParts: @escaping @Sendable (ServiceRuntime) async throws -> ServiceParts
    ) {
        self.name = name
        self.descriptorSets = descriptorSets
        self.eventRoutes = eventRoutes
        self.reflectionHidesUnservedServices = reflectionHidesUnservedServices
        self.makeParts = makeParts
    }
}

/// What a service serves, as its definition builds it from the runtime. The host adds health and reflection.
public struct ServiceParts: Sendable {
    public var services: [any RPCService]
    /// In front of every handler; `nil` for the standard chain: metrics, error mapping, the internal credential check.
    public var interceptors: [any ServerInterceptor]?
    /// Adjusts the RPC server before it starts (TLS, message size limits).
    public var configureServer: @Sendable (inout RPCServerConfiguration) -> Void

    public init(
        services: [any RPCService], interceptors: [any ServerInterceptor]? = nil,
        configureServer: @escaping @Sendable (inout RPCServerConfiguration) -> Void = { _ in }
    ) {
        self.services = services
        self.interceptors = interceptors
        self.configureServer = configureServer
    }
}

extension ServiceDefinition {
    /// The same service without its outbox relay: what it publishes stays in the outbox. For a host that shares its
    /// database with another host of the service whose relay must be the one to deliver (tests).
    public var withoutOutboxRelay: ServiceDefinition {
        var definition = self
        definition.eventRoutes = [:]
        return definition
    }
}

/// What a service's code gets from its host: configuration, logger, database pool, metrics and channels to the
/// other services (which sign every call with the internal credential).
public struct ServiceRuntime: Sendable {
    public let configuration: ServiceConfiguration
    public let logger: Logger
    public let credential: InternalCredential
    public let metrics: PrometheusCollectorRegistry
    /// The process's one `LISTEN` connection, for whatever waits for a `NOTIFY` (the host starts it).
    public let notifications: ServiceNotifications
    private let database: PostgresPool?
    private let channels: ServiceChannels
    private let background: BackgroundWork

    /// ``ServiceHost`` makes the runtime of the service it hosts. Code that calls a definition's services without a
    /// host (the request fuzz target in Tools/Fuzz) makes its own: it then runs no server, outbox relay or metrics
    /// endpoint, and owns `database`.
    public init(
        configuration: ServiceConfiguration, logger: Logger, database: PostgresPool?,
        metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
    ) {
        self.configuration = configuration
        self.logger = logger
        self.credential = InternalCredential(secret: configuration.internalSecret)
        self.metrics = metrics
        self.database = database
        self.channels = ServiceChannels()
        self.background = BackgroundWork()
        self.notifications = ServiceNotifications()
    }

    /// Runs `body` for as long as the service runs (a mail sender, a clean-up loop): the host cancels it on shutdown,
    /// after the server has stopped and before the pool closes, and waits for it to return.
    public func runInBackground(_ body: @escaping @Sendable () async -> Void) {
        background.start(body)
    }

    /// Runs `body` on shutdown, after the background work has stopped and before the pool closes (to release
    /// resources the services own, such as thread pools).
    public func onShutdown(_ body: @escaping @Sendable () async -> Void) {
        background.addShutdownHook(body)
    }

    /// Runs `body` when a graceful shutdown begins, before the server drains: for calls that never end by themselves
    /// (long-lived streams such as change notices and watchers) to end now, with a status that tells the client to
    /// reconnect, rather than be cut when the server's grace period runs out.
    public func onDrain(_ body: @escaping @Sendable () -> Void) {
        background.addDrainHook(body)
    }

    func drain() {
        background.drain()
    }

    func stopBackgroundWork() async {
        await background.stop()
    }

    /// The service's connection pool (as its own role, in its own schema).
    public var pool: PostgresPool {
        guard let database else { preconditionFailure("\(configuration.name) runs without a database URL") }
        return database
    }

    /// One shared channel per service, round-robin over its configured replicas; calls carry the internal credential
    /// with the identity of the call being served (see ``InternalCredentialClientInterceptor``).
    ///
    /// `configure` adjusts the channel when this call makes it (the first call for `service`).
    public func channel(
        to service: String, configure: (inout RPCChannelConfiguration) -> Void = { _ in }
    ) throws -> RPCChannel {
        try channels.channel(to: service) {
            var channelConfiguration = RPCChannelConfiguration(targets: configuration.addresses(of: service))
            channelConfiguration.serviceName = service
            channelConfiguration.connectTimeout = .seconds(5)
            channelConfiguration.backoff.maximum = .seconds(10)
            configure(&channelConfiguration)
            return try RPCChannel(
                configuration: channelConfiguration,
                interceptors: [InternalCredentialClientInterceptor(credential: credential, caller: configuration.name)],
                logger: logger)
        }
    }

    func closeChannels() async {
        await channels.closeAll()
    }
}

private final class ServiceChannels: Sendable {
    private let channels = Locked<[String: RPCChannel]>([:])

    func channel(to service: String, make: () throws -> RPCChannel) throws -> RPCChannel {
        try channels.withLock { channels in
            if let existing = channels[service] { return existing }
            let channel = try make()
            channels[service] = channel
            return channel
        }
    }

    func closeAll() async {
        let all = channels.withLock { channels in
            defer { channels = [:] }
            return Array(channels.values)
        }
        for channel in all { await channel.close() }
    }
}

/// Tasks and shutdown hooks services register through ``ServiceRuntime``.
private final class BackgroundWork: Sendable {
    private let state = Locked<(tasks: [Task<Void, Never>], hooks: [@Sendable () async -> Void])>(([], []))
    private let drainHooks = Locked<[@Sendable () -> Void]>([])

    func addDrainHook(_ body: @escaping @Sendable () -> Void) {
        drainHooks.withLock { $0.append(body) }
    }

    func drain() {
        for hook in drainHooks.withLock({ $0 }) { hook() }
    }

    func start(_ body: @escaping @Sendable () async -> Void) {
        let task = Task { await body() }
        state.withLock { $0.tasks.append(task) }
    }

    func addShutdownHook(_ body: @escaping @Sendable () async -> Void) {
        state.withLock { $0.hooks.append(body) }
    }

    func stop() async {
        let (tasks, hooks) = state.withLock { state in
            defer { state = ([], []) }
            return state
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        for hook in hooks { await hook() }
    }
}

/// One running service: migrations applied, RPC server listening (with health, reflection, metrics and the
/// internal-credential check), outbox relay delivering.
///
/// It is a swift-service-lifecycle `Service`: ``ServiceMain`` runs it in a `ServiceGroup` that turns SIGTERM and
/// SIGINT into a graceful shutdown. Tests start it on port 0 and call ``shutdown()``.
public final class ServiceHost: Service, Sendable {
    public let runtime: ServiceRuntime
    public let health: HealthStatusRegistry
    private let server: RPCServer
    private let metricsEndpoint: MetricsEndpoint?
    private let relay: Task<Void, Never>?
    /// The shutdown in progress, once one has begun: ``run()`` and ``shutdown()`` share it.
    private let stopping = Locked<Task<Void, Never>?>(nil)

    /// The RPC port (the real one when configured with port 0).
    public var port: Int { server.localAddress?.port ?? runtime.configuration.port }
    /// The metrics port, when one is served.
    public var metricsPort: Int? { metricsEndpoint?.port }

    public static func start(
        _ definition: ServiceDefinition, configuration: ServiceConfiguration, logger: Logger
    ) async throws -> ServiceHost {
        if configuration.internalSecret == InternalCredential.localDevelopmentSecret {
            logger.warning("using the local development internal secret; set HABITFLOW_INTERNAL_SECRET outside a laptop")
        }
        let pool = configuration.databaseURL.map { url in
            var poolConfiguration = PostgresPool.Configuration(connectionString: url)
            poolConfiguration.maximumConnections = configuration.databasePoolSize
            return PostgresPool(configuration: poolConfiguration, logger: logger)
        }
        let runtime = ServiceRuntime(
            configuration: configuration, logger: logger, database: pool, metrics: PrometheusCollectorRegistry())
        do {
            return try await start(definition, runtime: runtime, pool: pool)
        } catch {
            await runtime.stopBackgroundWork()
            await runtime.closeChannels()
            await pool?.shutdown()
            throw error
        }
    }

    private static func start(
        _ definition: ServiceDefinition, runtime: ServiceRuntime, pool: PostgresPool?
    ) async throws -> ServiceHost {
        let configuration = runtime.configuration
        if let pool {
            let directory = (configuration.sqlDirectory as NSString).appendingPathComponent(definition.name)
            let applied = try await PostgresMigrations.migrate(
                service: definition.name, pool: pool, directory: directory,
                libraryMigrations: LibraryMigrations.all, logger: runtime.logger)
            if !applied.isEmpty {
                runtime.logger.info("applied migrations", metadata: ["files": "\(applied.map(\.fileName))"])
            }
        }
        let parts = try await definition.makeParts(runtime)
        let health = HealthStatusRegistry()
        let servedNames = parts.services.map(\.serviceName)
        // A service that hides what it does not serve shows no event subscriber either.
        let sideDescriptorSets =
            definition.reflectionHidesUnservedServices
            ? [GRPCSideServicesDescriptorSet.base64]
            : [GRPCSideServicesDescriptorSet.base64, HabitFlowEventsDescriptorSet.base64]
        let reflection = try ReflectionService(
            descriptorSets: definition.descriptorSets + sideDescriptorSets,
            serviceNames: servedNames + [Grpc_Health_V1_Health.name] + ReflectionService.serviceNames,
            hidingUnlistedServices: definition.reflectionHidesUnservedServices)
        var serverConfiguration = RPCServerConfiguration(host: configuration.host, port: configuration.port)
        parts.configureServer(&serverConfiguration)
        let server = RPCServer(
            configuration: serverConfiguration,
            services: parts.services + [HealthService(registry: health)] + reflection.services,
            interceptors: parts.interceptors ?? [
                RPCMetricsInterceptor(registry: runtime.metrics),
                ErrorMappingServerInterceptor(logger: runtime.logger),
                // Events come from the services that publish them, never from the gateway; change notices go to
                // the gateway's watchers, which sign as themselves (a forwarded client call is signed "gateway").
                InternalCredentialServerInterceptor(
                    credential: runtime.credential,
                    serviceOnlyServices: [Habitflow_Events_V1_EventSubscriber.name, Habitflow_Events_V1_ChangeNotices.name]),
            ],
            logger: runtime.logger)
        try await server.start()

        let metricsEndpoint: MetricsEndpoint?
        do {
            metricsEndpoint = try await configuration.metricsPort.asyncMap { port in
                try await MetricsEndpoint.start(host: configuration.host, port: port, registry: runtime.metrics)
            }
        } catch {
            await server.shutdown()
            throw error
        }

        var relay: Task<Void, Never>?
        if let pool, !definition.eventRoutes.isEmpty {
            var subscribers: [String: any OutboxSubscriber] = [:]
            for name in Set(definition.eventRoutes.values.joined()) {
                subscribers[name] = RPCEventSubscriber(
                    client: Habitflow_Events_V1_EventSubscriber.Client(transport: try runtime.channel(to: name)))
            }
            var relayConfiguration = OutboxRelay.Configuration(schema: definition.name)
            relayConfiguration.observe = OutboxMetrics.observer(registry: runtime.metrics)
            let outboxRelay = OutboxRelay(
                pool: pool, configuration: relayConfiguration, routes: definition.eventRoutes, subscribers: subscribers,
                logger: runtime.logger)
            runtime.notifications.listen(on: relayConfiguration.channel) { _ in outboxRelay.notified() }
            relay = Task { await outboxRelay.runWithoutListening() }
        }
        if let pool {
            do {
                try runtime.notifications.start(
                    connectionString: pool.configuration.connectionString, logger: runtime.logger,
                    run: runtime.runInBackground)
            } catch {
                relay?.cancel()
                await metricsEndpoint?.close()
                await server.shutdown()
                throw error
            }
        }

        health.setStatus(.serving)
        for name in servedNames { health.setStatus(.serving, for: name) }
        return ServiceHost(
            runtime: runtime, health: health, server: server, metricsEndpoint: metricsEndpoint, relay: relay)
    }

    private init(
        runtime: ServiceRuntime, health: HealthStatusRegistry, server: RPCServer, metricsEndpoint: MetricsEndpoint?,
        relay: Task<Void, Never>?
    ) {
        self.runtime = runtime
        self.health = health
        self.server = server
        self.metricsEndpoint = metricsEndpoint
        self.relay = relay
    }

    /// Serves until a graceful shutdown (the service group's, or ``shutdown()``) has completed.
    public func run() async throws {
        do {
            try await withGracefulShutdownHandler {
                try await server.run()
            } onGracefulShutdown: {
                self.runtime.logger.notice("stopping")
                self.beginShutdown()
            }
        } catch {
            await shutdown()
            throw error
        }
        await shutdown()
    }

    /// Graceful, in this order: health NOT_SERVING; the drain hooks end long-lived streams; the server stops accepting, sends GOAWAY and lets calls in
    /// flight finish (within its grace period); the outbox relay and background work stop; the metrics endpoint,
    /// the channels to other services and the pool close. Calling it again waits for the same shutdown.
    public func shutdown() async {
        await beginShutdown().value
    }

    @discardableResult
    private func beginShutdown() -> Task<Void, Never> {
        stopping.withLock { stopping in
            if let stopping { return stopping }
            let task = Task { await self.stopInOrder() }
            stopping = task
            return task
        }
    }

    private func stopInOrder() async {
        health.markAllNotServing()
        runtime.drain()
        await server.shutdown()
        relay?.cancel()
        await relay?.value
        await runtime.stopBackgroundWork()
        await metricsEndpoint?.close()
        await runtime.closeChannels()
        if runtime.configuration.databaseURL != nil { await runtime.pool.shutdown() }
    }
}

extension Optional {
    fileprivate func asyncMap<Mapped>(_ transform: (Wrapped) async throws -> Mapped) async throws -> Mapped? {
        guard let self else { return nil }
        return try await transform(self)
    }
}

/// Turns what a handler throws into a status a client may see: ``RPCError``s pass; a database that cannot be reached
/// is `UNAVAILABLE` (retryable); anything else is `INTERNAL` with a correlation id that finds the logged error.
public struct ErrorMappingServerInterceptor: ServerInterceptor {
    private let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    public func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        do {
            try await next()
        } catch {
            throw mapped(error, method: context.method)
        }
    }

    /// What the client is told when a handler of `method` throws `error` (logging the errors it hides, and the cause
    /// of an ``RPCError`` with one: a service this process could not reach). `metadata` goes into those log lines.
    public func mapped(_ error: any Error, method: MethodDescriptor, metadata: Logger.Metadata = [:]) -> any Error {
        switch error {
        case let error as RPCError:
            if let cause = error.cause {
                logger.warning(
                    "call failed",
                    metadata: metadata.merging([
                        "method": "\(method)", "code": "\(error.code)", "error": "\(error.message)",
                        "cause": "\(cause)",
                    ]) { $1 })
            }
            return error
        case let error as any RPCErrorConvertible:
            return error.rpcError
        case is CancellationError:
            return CancellationError()
        case let error as PostgresError
        where [.connectionFailed, .connectionLost, .poolTimeout, .poolClosed].contains(error.kind):
            logger.warning(
                "database unavailable", metadata: metadata.merging(["method": "\(method)", "error": "\(error)"]) { $1 })
            return RPCError(.unavailable, "the database is unavailable; retry later")
        default:
            let correlationID = UUID.random().lowercasedString
            logger.error(
                "call failed",
                metadata: metadata.merging(
                    ["method": "\(method)", "correlation_id": "\(correlationID)", "error": "\(error)"]) { $1 })
            return RPCError.internalError(correlationID: correlationID)
        }
    }
}
