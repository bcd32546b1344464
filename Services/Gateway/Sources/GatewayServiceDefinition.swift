internal import HabitFlowInternalCredential
public import HabitFlowServiceKit
public import Logging
internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowCrypto
internal import HabitFlowEvents
internal import HabitFlowGatewayProtos
internal import HabitFlowGoalsProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowSocialProtos
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import HabitFlowRPCProxy
internal import HabitFlowRPCServer
internal import HabitFlowRPCSideServices
internal import HabitFlowRPCWeb
internal import HabitFlowTLS
internal import HabitFlowTokens
internal import Prometheus

/// The only process clients reach (DESIGN.md section 2): authenticates, rate-limits and forwards every public RPC to
/// the service that owns it, and serves the dashboard, the export and the change watch it assembles from several
/// services.
///
/// A service like the others, without a database: the host gives it health, reflection (showing the public API
/// only), metrics and a graceful shutdown; its own interceptor replaces the internal-credential check.
///
/// ```swift
/// await ServiceMain.run(GatewayServiceDefinition.make())                       // main.swift
/// let gateway = try await Gateway.start(configuration: configuration, logger: logger)  // tests, port 0
/// ```
public enum GatewayServiceDefinition {
    /// - Parameter configuration: the gateway's settings; `nil` reads them from the environment
    ///   (``GatewayConfiguration/fromEnvironment(_:environment:)``) for the host's ``ServiceConfiguration``.
    public static func make(configuration: GatewayConfiguration? = nil) -> ServiceDefinition {
        ServiceDefinition(
            name: "gateway", descriptorSets: GatewayRoutes.descriptorSets, reflectionHidesUnservedServices: true
        ) { runtime in
            let configuration = try configuration ?? GatewayConfiguration.fromEnvironment(runtime.configuration)
            return try makeParts(configuration: configuration, runtime: runtime)
        }
    }

    private static func makeParts(configuration: GatewayConfiguration, runtime: ServiceRuntime) throws -> ServiceParts {
        let logger = runtime.logger
        let credential = runtime.credential
        func channel(to owner: String) throws -> RPCChannel {
            try runtime.channel(to: owner) { channelConfiguration in
                configureChannel(&channelConfiguration, configuration: configuration)
            }
        }
        let authChannel = try channel(to: "auth")
        let authInternal = Habitflow_Auth_V1_AuthInternal.Client(transport: authChannel)
        let keys = AccessTokenKeys(refreshInterval: configuration.keyRefreshInterval) {
            try await fetchVerifier(from: authInternal, leeway: configuration.tokenLeeway)
        }
        let sessions = SessionChecker(
            checkInterval: configuration.sessionCheckInterval,
            pushedCheckInterval: configuration.pushedSessionCheckInterval, grace: configuration.sessionCheckGrace
        ) { caller in
            try await checkSession(caller, with: authInternal)
        }
        let sessionEnds = ChangeNoticeSubscription(
            service: "auth",
            client: Habitflow_Events_V1_ChangeNotices.Client(
                transport: authChannel.intercepted(
                    by: [InternalCredentialClientInterceptor(credential: credential, caller: SessionChecker.caller)])))
        // Auth's session-end notices let the session check trust its answers for longer (see ``SessionChecker``).
        runtime.runInBackground { await sessions.follow(sessionEnds, logger: logger) }

        let interceptor = GatewayInterceptor(
            logger: logger, rpcMetrics: RPCMetricsInterceptor(registry: runtime.metrics),
            errorMapping: ErrorMappingServerInterceptor(logger: logger),
            addressLimiter: RateLimiter(limit: configuration.addressRateLimit),
            authenticator: Authenticator(keys: keys, sessions: sessions),
            accountLimiter: RateLimiter(limit: configuration.accountRateLimit),
            metrics: GatewayMetrics(registry: runtime.metrics))
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
                    },
                    jsonTranscoders: route.jsonTranscoders
                ) { method, _, options in
                    prepareForwardedCall(
                        &options, method: method.descriptor, credential: credential,
                        defaultTimeout: configuration.defaultTimeout)
                })
        }
        func exportChannel(to owner: String) throws -> any RPCClientTransport {
            try channel(to: owner).intercepted(
                by: [InternalCredentialClientInterceptor(credential: credential, caller: DataExport.caller)])
        }
        let watch = try makeWatchService(configuration: configuration, runtime: runtime, channel: channel)
        services.append(
            GatewayServiceHandler(
                watch: watch,
                dashboard: DashboardService(
                    habits: Habitflow_Habits_V1_HabitsService.Client(transport: try channel(to: "habits")),
                    goals: Habitflow_Goals_V1_GoalsService.Client(transport: try channel(to: "goals")),
                    social: Habitflow_Social_V1_SocialService.Client(transport: try channel(to: "social")),
                    partTimeout: configuration.dashboardPartTimeout, logger: logger),
                export: DataExport(
                    sources: DataExport.Sources(
                        auth: Habitflow_Auth_V1_AuthInternal.Client(transport: try exportChannel(to: "auth")),
                        habits: Habitflow_Habits_V1_HabitsInternal.Client(transport: try exportChannel(to: "habits")),
                        goals: Habitflow_Goals_V1_GoalsInternal.Client(transport: try exportChannel(to: "goals")),
                        social: Habitflow_Social_V1_SocialInternal.Client(transport: try exportChannel(to: "social"))),
                    interval: configuration.exportInterval,
                    limiter: RateLimiter(limit: .init(perSecond: 1 / configuration.exportInterval.timeInterval, burst: 1)),
                    partTimeout: configuration.exportPartTimeout, streamTimeout: configuration.exportStreamTimeout,
                    logger: logger)))

        // Keys are fetched ahead of the first call and kept fresh, so a request rarely waits for them.
        let refreshInterval = configuration.keyRefreshInterval
        runtime.runInBackground {
            while !Task.isCancelled {
                _ = try? await keys.current()
                try? await Task.sleep(for: refreshInterval)
            }
        }
        let tls = configuration.tls
        let maxMessageSize = configuration.maxMessageSize
        let cors = configuration.cors
        return ServiceParts(services: services, interceptors: [interceptor]) { server in
            // The one door for browsers: gRPC-Web and Connect next to gRPC, through the same interceptor.
            server.web = WebConfiguration(cors: cors)
            server.tls = tls.map { files in
                .server(certificateChain: .file(files.certificatePath), privateKey: .file(files.privateKeyPath))
            }
            server.maxReceiveMessageSize = maxMessageSize
        }
    }

    // MARK: Pieces

    /// `WatchChanges`: the hub of open streams, fed by one notice subscription per service for the whole gateway
    /// (running with the gateway), and emptied when a graceful shutdown begins.
    private static func makeWatchService(
        configuration: GatewayConfiguration, runtime: ServiceRuntime, channel: (String) throws -> RPCChannel
    ) throws -> WatchService {
        let credential = runtime.credential
        func notices(_ owner: String) throws -> Habitflow_Events_V1_ChangeNotices.Client {
            Habitflow_Events_V1_ChangeNotices.Client(
                transport: try channel(owner).intercepted(
                    by: [InternalCredentialClientInterceptor(credential: credential, caller: WatchService.caller)]))
        }
        let habits = Habitflow_Habits_V1_HabitsService.Client(transport: try channel("habits"))
        let goals = Habitflow_Goals_V1_GoalsService.Client(transport: try channel("goals"))
        let social = Habitflow_Social_V1_SocialService.Client(transport: try channel("social"))
        let feeds = [
            ChangeFeed(.habits, notices: try notices("habits")) { cursor, options in
                try await habits.listChanges(.with { $0.cursor = cursor }, options: options)
            },
            ChangeFeed(.goals, notices: try notices("goals")) { cursor, options in
                try await goals.listChanges(.with { $0.cursor = cursor }, options: options)
            },
            ChangeFeed(.social, notices: try notices("social")) { cursor, options in
                try await social.listChanges(.with { $0.cursor = cursor }, options: options)
            },
        ]
        let hub = WatchHub(limits: .init(perUser: configuration.watchersPerUser, total: configuration.maximumWatchers))
        let leases = WatchLeases(
            leases: Dictionary(uniqueKeysWithValues: feeds.map { ($0.source, $0.watchUsers) }), hub: hub)
        let logger = runtime.logger
        for feed in feeds {
            runtime.runInBackground { await feed.follow(into: hub, logger: logger) }
            runtime.runInBackground { await leases.keep(feed.source, logger: logger) }
        }
        runtime.onDrain { hub.drain() }
        return WatchService(
            feeds: feeds, hub: hub, leases: leases,
            settings: .init(
                heartbeatInterval: configuration.watchHeartbeatInterval,
                slowClientTimeout: configuration.watchSlowClientTimeout, readTimeout: configuration.defaultTimeout),
            logger: logger)
    }

    /// One pooled channel per service, a connection per replica and event loop, round-robin over the replicas,
    /// signing every call with the internal credential (forwarded calls bypass that: the gateway signs them itself,
    /// see ``prepareForwardedCall(_:method:credential:defaultTimeout:info:)``). Connecting is bounded by the short
    /// connect timeout and retries are few and quick, so a service that is down answers `UNAVAILABLE` at once rather
    /// than after the client's deadline.
    private static func configureChannel(
        _ channelConfiguration: inout RPCChannelConfiguration, configuration: GatewayConfiguration
    ) {
        channelConfiguration.connectTimeout = configuration.connectTimeout
        // A forwarded call then goes out on the event loop of the client's connection: no thread hop either way.
        channelConfiguration.connectionsPerTarget = RPCChannel.sharedGroupEventLoopCount
        channelConfiguration.backoff.maximum = .seconds(5)
        channelConfiguration.retry.maxAttempts = 3
        channelConfiguration.retry.maxBackoff = .milliseconds(200)
        channelConfiguration.maxReceiveMessageSize = configuration.maxMessageSize
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

/// `habitflow.gateway.v1.GatewayService`: the gateway's own RPCs, each built from several services.
struct GatewayServiceHandler: Habitflow_Gateway_V1_GatewayService.Handler {
    let watch: WatchService
    let dashboard: DashboardService
    let export: DataExport

    func getDashboard(
        request: Habitflow_Gateway_V1_GetDashboardRequest, context: ServerContext
    ) async throws -> Habitflow_Gateway_V1_Dashboard {
        try await dashboard.getDashboard(request: request, context: context)
    }

    func exportMyData(
        request: Habitflow_Gateway_V1_ExportMyDataRequest,
        responses: ResponseWriter<Habitflow_Gateway_V1_ExportMyDataChunk>, context: ServerContext
    ) async throws {
        try await export.exportMyData(responses: responses, context: context)
    }

    func watchChanges(
        request: Habitflow_Gateway_V1_WatchChangesRequest,
        responses: ResponseWriter<Habitflow_Gateway_V1_WatchChangesResponse>, context: ServerContext
    ) async throws {
        try await watch.watchChanges(request: request, responses: responses, context: context)
    }
}

/// Starts a gateway host: what tests and benchmarks call (port 0 for a free port).
public enum Gateway {
    public static func start(configuration: GatewayConfiguration, logger: Logger) async throws -> ServiceHost {
        try await ServiceHost.start(
            GatewayServiceDefinition.make(configuration: configuration), configuration: configuration.service,
            logger: logger)
    }
}
