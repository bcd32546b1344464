public import HabitFlowServiceKit
public import Logging
internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowCrypto
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import HabitFlowRPCServer
public import HabitFlowRPCSideServices
internal import HabitFlowTLS
internal import HabitFlowTokens
internal import Prometheus

/// The only process clients reach (DESIGN.md section 2): authenticates, rate-limits and forwards every public RPC to
/// the service that owns it, and serves the dashboard it assembles from several services.
///
/// ```swift
/// let gateway = try await Gateway.start(configuration: configuration, logger: logger)  // port 0 in tests
/// ...
/// await gateway.shutdown()
/// ```
public final class Gateway: ServiceProcess {
    public let configuration: GatewayConfiguration
    /// Health of the gateway itself and of each public service name.
    public let health: HealthStatusRegistry
    private let server: RPCServer
    private let channels: [String: RPCChannel]
    private let metricsEndpoint: MetricsEndpoint?
    private let keyRefresher: Task<Void, Never>

    public var port: Int { server.localAddress?.port ?? configuration.service.port }
    public var metricsPort: Int? { metricsEndpoint?.port }

    public static func start(configuration: GatewayConfiguration, logger: Logger) async throws -> Gateway {
        let service = configuration.service
        if service.internalSecret == ServiceConfiguration.localDevelopmentSecret {
            logger.warning("using the local development internal secret; set HABITFLOW_INTERNAL_SECRET outside a laptop")
        }
        let credential = InternalCredential(secret: service.internalSecret)
        var channels: [String: RPCChannel] = [:]
        func channel(to owner: String) throws -> RPCChannel {
            if let existing = channels[owner] { return existing }
            let made = try makeChannel(to: owner, configuration: configuration, credential: credential, logger: logger)
            channels[owner] = made
            return made
        }
        let auth = try channel(to: "auth")
        let habits = try channel(to: "habits")

        let registry = PrometheusCollectorRegistry()
        let metrics = GatewayMetrics(registry: registry)
        let authInternal = Habitflow_Auth_V1_AuthInternal.Client(transport: auth)
        let keys = AccessTokenKeys(refreshInterval: configuration.keyRefreshInterval) {
            try await fetchVerifier(from: authInternal, leeway: configuration.tokenLeeway)
        }
        let sessions = SessionChecker(
            checkInterval: configuration.sessionCheckInterval, grace: configuration.sessionCheckGrace
        ) { caller in
            try await checkSession(caller, with: authInternal)
        }

        let interceptor = GatewayInterceptor(
            logger: logger, rpcMetrics: RPCMetricsInterceptor(registry: registry),
            errorMapping: ErrorMappingServerInterceptor(logger: logger),
            addressLimiter: RateLimiter(limit: configuration.addressRateLimit),
            authenticator: Authenticator(keys: keys, sessions: sessions),
            accountLimiter: RateLimiter(limit: configuration.accountRateLimit), metrics: metrics)
        var services: [any RPCService] = []
        for route in GatewayRoutes.forwarded {
            let schema = try ServiceSchema.load(route.service, fromDescriptorSets: [route.descriptorSet])
            let owner = try channel(to: route.owner)
            // The gateway signs forwarded calls itself (it knows the caller): the channel's interceptor, which
            // would take the identity back out of the metadata, is skipped.
            services.append(
                ForwardingService(
                    schema: schema, transport: owner.bypassingInterceptors,
                    unaryForwarders: { method in
                        unaryForwarder(
                            method, channel: owner, interceptor: interceptor, credential: credential,
                            defaultTimeout: configuration.defaultTimeout)
                    }
                ) { method, _, options in
                    prepareForwardedCall(
                        &options, method: method.descriptor, credential: credential,
                        defaultTimeout: configuration.defaultTimeout)
                })
        }
        services.append(
            DashboardService(
                habits: Habitflow_Habits_V1_HabitsService.Client(transport: habits),
                partTimeout: configuration.dashboardPartTimeout))
        let health = HealthStatusRegistry()
        let reflection = try ReflectionService(
            descriptorSets: GatewayRoutes.descriptorSets, serviceNames: GatewayRoutes.publicServiceNames,
            hidingUnlistedServices: true)
        services += [HealthService(registry: health)] + reflection.services

        var serverConfiguration = RPCServerConfiguration(host: service.host, port: service.port)
        serverConfiguration.tls = configuration.tls.map { files in
            .server(certificateChain: .file(files.certificatePath), privateKey: .file(files.privateKeyPath))
        }
        serverConfiguration.maxReceiveMessageSize = configuration.maxMessageSize
        let server = RPCServer(
            configuration: serverConfiguration, services: services,
            interceptors: [interceptor],
            logger: logger)

        let metricsEndpoint: MetricsEndpoint?
        do {
            try await server.start()
            if let port = service.metricsPort {
                metricsEndpoint = try await MetricsEndpoint.start(host: service.host, port: port, registry: registry)
            } else {
                metricsEndpoint = nil
            }
        } catch {
            await server.shutdown()
            for channel in channels.values { await channel.close() }
            throw error
        }
        health.setStatus(.serving)
        for name in GatewayRoutes.forwarded.map(\.service) + GatewayRoutes.own { health.setStatus(.serving, for: name) }

        // Keys are fetched ahead of the first call and kept fresh, so a request rarely waits for them.
        let refreshInterval = configuration.keyRefreshInterval
        let keyRefresher = Task {
            while !Task.isCancelled {
                _ = try? await keys.current()
                try? await Task.sleep(for: refreshInterval)
            }
        }
        return Gateway(
            configuration: configuration, health: health, server: server, channels: channels,
            metricsEndpoint: metricsEndpoint, keyRefresher: keyRefresher)
    }

    private init(
        configuration: GatewayConfiguration, health: HealthStatusRegistry, server: RPCServer,
        channels: [String: RPCChannel], metricsEndpoint: MetricsEndpoint?, keyRefresher: Task<Void, Never>
    ) {
        self.configuration = configuration
        self.health = health
        self.server = server
        self.channels = channels
        self.metricsEndpoint = metricsEndpoint
        self.keyRefresher = keyRefresher
    }

    public func run() async throws {
        try await server.run()
    }

    /// Graceful: health NOT_SERVING, GOAWAY and in-flight calls finish, then the channels to the services close.
    public func shutdown() async {
        health.markAllNotServing()
        keyRefresher.cancel()
        await server.shutdown()
        await metricsEndpoint?.close()
        for channel in channels.values { await channel.close() }
    }

    // MARK: Pieces

    /// One pooled channel per service, a connection per replica and event loop, round-robin over the replicas,
    /// signing every call with the internal credential (forwarded calls bypass that: the gateway signs them itself,
    /// see ``prepareForwardedCall(_:method:credential:defaultTimeout:)``). Connecting is bounded by the short connect timeout and retries are few and quick, so a service
    /// that is down answers `UNAVAILABLE` at once rather than after the client's deadline.
    private static func makeChannel(
        to owner: String, configuration: GatewayConfiguration, credential: InternalCredential, logger: Logger
    ) throws -> RPCChannel {
        var channelConfiguration = RPCChannelConfiguration(targets: configuration.service.addresses(of: owner))
        channelConfiguration.connectTimeout = configuration.connectTimeout
        // A forwarded call then goes out on the event loop of the client's connection: no thread hop either way.
        channelConfiguration.connectionsPerTarget = RPCChannel.sharedGroupEventLoopCount
        channelConfiguration.backoff.maximum = .seconds(5)
        channelConfiguration.retry.maxAttempts = 3
        channelConfiguration.retry.maxBackoff = .milliseconds(200)
        channelConfiguration.maxReceiveMessageSize = configuration.maxMessageSize
        return try RPCChannel(
            configuration: channelConfiguration,
            interceptors: [InternalCredentialClientInterceptor(credential: credential, caller: "gateway")],
            logger: logger)
    }

    /// Shapes a client call on its way to a service: the client's token, its request id and anything posing as our
    /// internal credential are removed; the request id and a deadline (the default when the client set none) are
    /// added, and the call is signed for the caller's identity (the user the gateway authenticated, if any, and the
    /// client's address).
    static func prepareForwardedCall(
        _ options: inout CallOptions, method: MethodDescriptor, credential: InternalCredential, defaultTimeout: Duration,
        info: GatewayCallInfo? = GatewayCallInfo.current
    ) {
        // One pass over the metadata: it runs for every forwarded call.
        options.metadata.removeAll { key in
            key == "authorization" || key.hasPrefix("x-habitflow-") || (info != nil && key == GatewayCallInfo.requestIDKey)
        }
        if let info { options.metadata.addRequestID(info.requestID) }
        credential.sign(
            CallerIdentity(
                caller: "gateway", userID: info?.caller?.userID, sessionID: info?.caller?.sessionID,
                clientAddress: info?.clientAddress),
            method: method, into: &options.metadata)
        if options.deadline == nil { options.timeout = defaultTimeout }
    }

    private static func fetchVerifier(
        from auth: Habitflow_Auth_V1_AuthInternal.Client, leeway: Duration
    ) async throws -> AccessTokenVerifier {
        let response = try await auth.getVerificationKeys(
            Habitflow_Auth_V1_GetVerificationKeysRequest(), options: CallOptions(timeout: .seconds(3)))
        let keys = try response.keys.filter { $0.algorithm == "EdDSA" }.map { key in
            VerificationKey(
                keyID: key.keyID, publicKey: try Ed25519.PublicKey(rawRepresentation: Array(key.publicKey)),
                notAfter: key.hasNotAfter ? key.notAfter.date : nil)
        }
        return AccessTokenVerifier(issuer: response.issuer, audience: response.audience, keys: keys, leeway: leeway)
    }

    private static func checkSession(
        _ caller: AuthenticatedCaller, with auth: Habitflow_Auth_V1_AuthInternal.Client
    ) async throws -> SessionChecker.SessionState {
        let response = try await auth.checkSession(
            .with {
                $0.sessionID = caller.sessionID
                $0.userID = caller.userIDString
            },
            options: CallOptions(timeout: .seconds(2)))
        switch response.state {
        case .active: return .active
        case .revoked: return .revoked
        case .expired: return .expired
        case .notFound, .unspecified, .UNRECOGNIZED: return .notFound
        }
    }
}
