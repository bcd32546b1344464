internal import HabitFlowAuthProtos
public import HabitFlowServiceKit

/// The auth service: accounts, passwords, sessions and tokens, reset, email change, social login, account deletion
/// (DESIGN.md section 3, Auth). `AuthServiceDefinition.make()` is what `habitflow-auth` runs; tests pass their own
/// settings (clock, bcrypt cost, SMTP server, providers). `ChangeNotices` tells the gateway whose sessions ended
/// (migration 0003), so it can trust its cached session checks for longer.
public enum AuthServiceDefinition {
    /// The events auth publishes and the deployed services that consume them; goals and social join when they land.
    /// Only services that run: each subscriber has its own queue in auth's outbox, kept until it takes it, so one
    /// that is not there would pile up every event forever (it no longer holds back the other subscribers).
    public static let eventRoutes: [String: [String]] = [
        "habitflow.events.v1.UserCreated": ["habits", "goals", "social"],
        "habitflow.events.v1.UserUpdated": ["habits", "goals", "social"],
        "habitflow.events.v1.UserDeleted": ["habits", "goals", "social"],
    ]

    /// - Parameter given: the settings; nil: read from the environment (``AuthSettings/fromEnvironment(_:internalSecret:)``).
    public static func make(settings given: AuthSettings? = nil) -> ServiceDefinition {
        ServiceDefinition(
            name: "auth", descriptorSets: [AuthProtosDescriptorSet.base64], eventRoutes: eventRoutes
        ) { runtime in
            let settings = try given ?? AuthSettings.fromEnvironment(runtime: runtime)
            let store = AuthStore(pool: runtime.pool)
            let hasher = PasswordHasher(cost: settings.bcryptCost, threadCount: settings.passwordHashingThreads)
            let logger = runtime.logger
            let transport: any MailTransport =
                settings.smtp.map { SMTPMailTransport(configuration: $0) }
                ?? MailDropTransport(folder: settings.mailDropFolder, logger: logger)
            if settings.smtp == nil {
                logger.warning(
                    "HABITFLOW_SMTP_HOST is not set: each mail, with its token, is written as a file (a local stack only)",
                    metadata: ["folder": "\(settings.mailDropFolder)"])
            }
            let mail = MailDispatcher(
                store: store, transport: transport, sender: settings.mailSender, clock: settings.clock,
                logger: logger, pollInterval: settings.mailPollInterval)
            let core = AuthCore(
                store: store, settings: settings, hasher: hasher,
                keyRing: SigningKeyRing(store: store, settings: settings, logger: logger), mail: mail,
                social: SocialLogin(settings: settings), logger: logger)
            let maintenance = Maintenance(store: store, settings: settings, logger: logger)
            runtime.runInBackground { await mail.run() }
            runtime.runInBackground { await maintenance.run() }
            runtime.onShutdown { await hasher.shutdown() }
            return [
                AuthServiceHandler(core: core), AuthInternalHandler(core: core),
                ChangeNoticesService(runtime: runtime, notified: .everyUser),
            ]
        }
    }
}
