public import HabitFlowPostgres
internal import HabitFlowLocking
internal import Logging

/// The service's one `LISTEN` connection, shared by everything in the process that waits for a `NOTIFY` (its change
/// notices, its outbox relay).
///
/// One connection rather than one per consumer because Postgres (15) wakes every listening connection of the
/// database for every notification, whatever its channel, and all services share the database: each listening
/// connection costs Postgres about 20 µs per write in any service (`Benchmarks/README.md`, end-to-end).
///
/// Consumers register while the service's parts are made; the host starts listening once the outbox relay has
/// registered too. A consumer's handler runs on the listener's thread, so it must be quick and never block (take a
/// lock, signal a wake-up). It sees ``PostgresNotificationListener/Event/listening`` and
/// ``PostgresNotificationListener/Event/lost`` as every consumer does, and only the notifications of its channel.
public final class ServiceNotifications: Sendable {
    public typealias Handler = @Sendable (PostgresNotificationListener.Event) -> Void

    private let handlers = Locked<(byChannel: [String: [Handler]], started: Bool)>(([:], false))

    init() {}

    /// Hands `handler` the events of `channel` once the host starts listening.
    public func listen(on channel: String, _ handler: @escaping Handler) {
        handlers.withLock { handlers in
            precondition(!handlers.started, "listen(on:) after the service started listening")
            handlers.byChannel[channel, default: []].append(handler)
        }
    }

    /// Listens on every registered channel over one connection until `run`'s task is cancelled; nothing when no
    /// channel was registered. Throws for a channel name Postgres would not take.
    func start(
        connectionString: String, logger: Logger, run: (@escaping @Sendable () async -> Void) -> Void
    ) throws(PostgresError) {
        let byChannel = handlers.withLock { handlers in
            handlers.started = true
            return handlers.byChannel
        }
        guard !byChannel.isEmpty else { return }
        let listener = try PostgresNotificationListener(
            connectionString: connectionString, channels: byChannel.keys.sorted(), logger: logger)
        let everyHandler = byChannel.values.flatMap { $0 }
        run {
            await listener.run { event in
                switch event {
                case .listening, .lost: for handler in everyHandler { handler(event) }
                case .notification(let notification):
                    for handler in byChannel[notification.channel] ?? [] { handler(event) }
                }
            }
        }
    }
}
