internal import HabitFlowAuthProtos
internal import HabitFlowRPC
public import HabitFlowServiceKit
internal import Logging

/// The auth service: accounts, passwords, sessions and tokens, reset, email change, social login, account deletion
/// (DESIGN.md section 3, Auth). `AuthService.definition()` is what `habitflow-auth` runs; tests pass their own
/// settings (clock, bcrypt cost, SMTP server, providers).
public enum AuthService {
    /// The events auth publishes and the deployed services that consume them; goals and social join when they land.
    /// Only services that run: each subscriber has its own queue in auth's outbox, kept until it takes it, so one
    /// that is not there would pile up every event forever (it no longer holds back the other subscribers).
    public static let eventRoutes: [String: [String]] = [
        "habitflow.events.v1.UserCreated": ["habits"],
        "habitflow.events.v1.UserUpdated": ["habits"],
        "habitflow.events.v1.UserDeleted": ["habits"],
    ]

    /// The service with settings read from the environment (``AuthSettings/fromEnvironment(_:internalSecret:)``).
    public static func definition() -> ServiceDefinition {
        definition { runtime in
            let (settings, warnings) = try AuthSettings.fromEnvironment(
                internalSecret: runtime.configuration.internalSecret)
            for warning in warnings { runtime.logger.warning("\(warning)") }
            return settings
        }
    }

    /// The service with the given settings.
    public static func definition(settings: AuthSettings) -> ServiceDefinition {
        definition { _ in settings }
    }

    private static func definition(
        settings makeSettings: @escaping @Sendable (ServiceRuntime) throws -> AuthSettings
    ) -> ServiceDefinition {
        ServiceDefinition(
            name: "auth", descriptorSets: [AuthProtosDescriptorSet.base64], eventRoutes: eventRoutes
        ) { runtime in
            let settings = try makeSettings(runtime)
            let pool = runtime.pool
            let logger = runtime.logger
            let hasher = PasswordHasher(cost: settings.bcryptCost, threadCount: settings.passwordHashingThreads)
            let transport: any MailTransport =
                settings.smtp.map { SMTPMailTransport(configuration: $0) } ?? LoggingMailTransport(logger: logger)
            let mail = MailDispatcher(
                pool: pool, transport: transport, sender: settings.mailSender, clock: settings.clock, logger: logger,
                pollInterval: settings.mailPollInterval)
            let keyRing = SigningKeyRing(pool: pool, settings: settings, logger: logger)
            let core = AuthCore(
                pool: pool, settings: settings, hasher: hasher, keyRing: keyRing,
                throttle: Throttle(pool: pool, clock: settings.clock), mail: mail,
                social: SocialLogin(settings: settings), logger: logger)
            let maintenance = Maintenance(pool: pool, keyRing: keyRing, settings: settings, logger: logger)
            runtime.runInBackground { await mail.run() }
            runtime.runInBackground { await maintenance.run() }
            runtime.onShutdown { await hasher.shutdown() }
            return [AuthServiceHandler(core: core), AuthInternalHandler(core: core)]
        }
    }
}
