internal import Foundation
public import HabitFlowAuth
internal import HabitFlowAuthProtos
public import HabitFlowGateway
internal import HabitFlowGoals
internal import HabitFlowHabits
internal import HabitFlowSocial
public import HabitFlowRPCClient
public import HabitFlowServiceKit
internal import HabitFlowTestSupport
public import Logging

/// Auth, habits (one or more replicas), goals, social and the gateway, in this process on free ports against the test Postgres
/// (scripts/test): the real stack as a client sees it, for the gateway's and the SDK's tests.
public struct TestStack: Sendable {
    public static let internalSecret = "stack-test-secret"
    /// The key that seals auth's signing keys. Auth's own tests use the same one: the signing keys table is shared by
    /// every auth host of the test run, and each must open every key in it.
    public static let keyEncryptionKey = [UInt8](repeating: 7, count: 32)

    public let auth: ServiceHost
    public let habits: [ServiceHost]
    public let goals: ServiceHost
    public let social: ServiceHost
    public let gateway: ServiceHost
    public let logger: Logger

    public var gatewayPort: Int { gateway.port }

    /// - Parameters:
    ///   - configureGateway: the gateway's configuration (generous rate limits already set).
    ///   - configureAuth: settings of the auth host (cheap bcrypt, no mail server and no maintenance already set).
    public static func start(
        habitsReplicas: Int = 1,
        configureGateway: (inout GatewayConfiguration) -> Void = { _ in },
        configureAuth: (inout AuthSettings) -> Void = { _ in }
    ) async throws -> TestStack {
        var logger = Logger(label: "stack-tests")
        logger.logLevel = .warning
        // No host runs its outbox relay: the outbox tables are shared with the services' own suites, which wait for the
        // events their hosts publish. Nothing here needs events (the services learn a user at their first call), so
        // the addresses only relays would use point nowhere. Each service starts after those it calls, on any free
        // port, with their addresses (choosing ports ahead would race with the other stacks tests start in parallel):
        // habits, auth, social (calls auth and habits), goals (calls habits and social), the gateway.
        let nowhere = [RPCChannelConfiguration.Target(host: "127.0.0.1", port: 1)]
        var habitsHosts: [ServiceHost] = []
        for _ in 0..<max(habitsReplicas, 1) {
            habitsHosts.append(try await startHabits(port: 0, logger: logger))
        }
        let habitsTargets = habitsHosts.map { RPCChannelConfiguration.Target(host: "127.0.0.1", port: $0.port) }

        let auth = try await startAuth(port: 0, logger: logger, configure: configureAuth)
        let authTargets = [RPCChannelConfiguration.Target(host: "127.0.0.1", port: auth.port)]

        var socialConfiguration = try serviceConfiguration("social")
        socialConfiguration.serviceAddresses = ["auth": authTargets, "habits": habitsTargets, "goals": nowhere]
        let social = try await ServiceHost.start(
            SocialServiceDefinition.make().withoutOutboxRelay, configuration: socialConfiguration, logger: logger)
        let socialTargets = [RPCChannelConfiguration.Target(host: "127.0.0.1", port: social.port)]

        var goalsConfiguration = try serviceConfiguration("goals")
        goalsConfiguration.serviceAddresses = ["habits": habitsTargets, "social": socialTargets]
        let goals = try await ServiceHost.start(
            GoalsServiceDefinition.make().withoutOutboxRelay, configuration: goalsConfiguration, logger: logger)
        let goalsTargets = [RPCChannelConfiguration.Target(host: "127.0.0.1", port: goals.port)]

        var gatewayConfiguration = GatewayConfiguration(
            service: ServiceConfiguration(
                service: "gateway", port: 0, databaseURL: nil, sqlDirectory: TestEnvironment.sqlRoot,
                internalSecret: internalSecret))
        gatewayConfiguration.service.serviceAddresses = [
            "auth": authTargets, "habits": habitsTargets, "goals": goalsTargets, "social": socialTargets,
        ]
        gatewayConfiguration.addressRateLimit = .init(perSecond: 10_000, burst: 10_000)
        gatewayConfiguration.accountRateLimit = .init(perSecond: 10_000, burst: 10_000)
        configureGateway(&gatewayConfiguration)
        let gateway = try await Gateway.start(configuration: gatewayConfiguration, logger: logger)
        return TestStack(
            auth: auth, habits: habitsHosts, goals: goals, social: social, gateway: gateway, logger: logger)
    }

    /// A habits host like the stack's (on `port`, 0 for any): to start a replica again on the port it had.
    public static func startHabits(port: Int, logger: Logger) async throws -> ServiceHost {
        let nowhere = [RPCChannelConfiguration.Target(host: "127.0.0.1", port: 1)]
        var configuration = try serviceConfiguration("habits")
        configuration.port = port
        configuration.serviceAddresses = ["goals": nowhere, "social": nowhere]
        return try await ServiceHost.start(
            HabitsServiceDefinition.make().withoutOutboxRelay, configuration: configuration, logger: logger)
    }

    /// An auth host like the stack's (on `port`, 0 for any): to start auth again on the port it had.
    public static func startAuth(
        port: Int, logger: Logger, configure: (inout AuthSettings) -> Void = { _ in }
    ) async throws -> ServiceHost {
        let nowhere = [RPCChannelConfiguration.Target(host: "127.0.0.1", port: 1)]
        var settings = AuthSettings(keyEncryptionKey: keyEncryptionKey)
        settings.bcryptCost = 4
        settings.passwordHashingThreads = 2
        settings.maintenanceInterval = nil
        configure(&settings)
        var configuration = try serviceConfiguration("auth")
        configuration.port = port
        configuration.serviceAddresses = ["habits": nowhere, "goals": nowhere, "social": nowhere]
        return try await ServiceHost.start(
            AuthServiceDefinition.make(settings: settings).withoutOutboxRelay, configuration: configuration,
            logger: logger)
    }

    private static func serviceConfiguration(_ service: String) throws -> ServiceConfiguration {
        var configuration = ServiceConfiguration(
            service: service, port: 0, databaseURL: try TestEnvironment.serviceURL(service),
            sqlDirectory: TestEnvironment.sqlRoot, internalSecret: internalSecret)
        configuration.logLevel = .warning
        configuration.databasePoolSize = 4
        return configuration
    }

    /// A channel to the gateway (h2c; pass `configure` for TLS or limits).
    public func gatewayChannel(configure: (inout RPCChannelConfiguration) -> Void = { _ in }) throws -> RPCChannel {
        var configuration = RPCChannelConfiguration(host: "127.0.0.1", port: gatewayPort)
        configure(&configuration)
        return try RPCChannel(configuration: configuration, logger: logger)
    }

    public func stop() async {
        await gateway.shutdown()
        await auth.shutdown()
        await goals.shutdown()
        await social.shutdown()
        for host in habits { await host.shutdown() }
    }
}

/// A fresh account's credentials: unique per call, so tests sharing the database never collide.
public struct TestAccount: Sendable {
    public var email: String
    public var username: String
    public var password: String

    public init() {
        let suffix = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        email = "gw-\(suffix)@example.com"
        username = "gw_\(suffix)"
        password = "correct horse \(suffix)"
    }
}
