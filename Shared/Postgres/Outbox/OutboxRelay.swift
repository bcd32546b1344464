internal import Foundation
internal import HabitFlowEvents
public import HabitFlowPostgres
public import Logging
internal import HabitFlowCrypto
internal import SwiftProtobuf
internal import HabitFlowLocking

/// Delivers a service's outbox to its subscribers: at least once, in order per aggregate and subscriber, each
/// subscriber on its own, retrying failed deliveries with a capped exponential backoff.
///
/// Two steps, each its own loop:
/// - **Fan-out**: every new outbox row gets one `outbox_deliveries` row per subscriber its event type is routed to
///   (rows routed to no one leave the outbox at once), and is marked `fanned_out`. It is woken by `NOTIFY` when an
///   appending transaction commits (over a ``PostgresNotificationListener``) and also looks every
///   ``Configuration/safetyPollInterval``. One relay at a time fans out (a transaction-level advisory lock per schema).
/// - **Delivery**: one loop per subscriber walks that subscriber's rows in sequence order, skipping aggregates whose
///   earlier event waits for a retry, and deletes each row once the subscriber returned (the outbox row goes with the
///   last subscriber's). Among replicas, one relay at a time delivers to a subscriber (a session advisory lock per
///   schema and subscriber), so per-aggregate order holds across replicas. A subscriber that is unreachable
///   (``OutboxSubscriberUnreachable``) ends its pass and is backed off as a whole; the others carry on.
///
/// A crash between a subscriber's commit and the relay's bookkeeping means the event is delivered again, which
/// consumers absorb by event id.
public final class OutboxRelay: Sendable {
    public struct Configuration: Sendable {
        /// The service's schema, where `outbox` lives, for example `auth`.
        public var schema: String
        /// The envelope's `source`. Default: the schema.
        public var source: String
        /// Events read per round trip. Default 100.
        public var batchSize = 100
        /// How often to look for events without a notification. Default 10 s.
        public var safetyPollInterval: Duration = .seconds(10)
        /// The delay after a first failed delivery (or a first unreachable pass), doubled per further failure up to
        /// ``maximumRetryDelay``, then ±25 % jitter: with the defaults at most 5 s, so a subscriber that comes back
        /// after any outage starts receiving its backlog within 5 s.
        public var initialRetryDelay: Duration = .milliseconds(200)
        public var maximumRetryDelay: Duration = .seconds(4)
        /// Called with each subscriber's backlog (deliveries not yet done) and the age of its oldest undelivered
        /// event (zero without backlog) after every delivery pass, and at least every ``observationInterval``.
        public var observe: (@Sendable (_ subscriber: String, _ backlog: Int, _ oldestAge: Duration) -> Void)?
        public var observationInterval: Duration = .seconds(5)

        public init(schema: String) {
            self.schema = schema
            self.source = schema
        }

        /// The channel the outbox trigger notifies.
        public var channel: String { "habitflow_outbox_\(schema)" }
    }

    public let configuration: Configuration
    private let pool: PostgresPool
    private let listenerConnectionString: String
    /// Subscriber names by event type; `"*"` routes every type.
    private let routes: [String: [String]]
    private let subscribers: [String: any OutboxSubscriber]
    private let logger: Logger
    private let fanOutWakeup = Wakeup()
    private let deliveryWakeups: [String: Wakeup]

    /// - Parameters:
    ///   - pool: connects as the service's role (its `search_path` is the service's schema).
    ///   - listenerConnectionString: for the relay's own `LISTEN` connection (``run()``), normally the pool's.
    ///   - routes: subscriber names by event type (the payload's full proto name); `"*"` subscribes to every type.
    ///     A type routed to no one leaves the outbox undelivered.
    ///   - subscribers: by name; every routed name must have one.
    public init(
        pool: PostgresPool, listenerConnectionString: String? = nil, configuration: Configuration,
        routes: [String: [String]], subscribers: [String: any OutboxSubscriber], logger: Logger
    ) {
        let routed = Set(routes.values.joined())
        precondition(
            routed.isSubset(of: subscribers.keys),
            "routed to unknown subscribers: \(routed.subtracting(subscribers.keys).sorted())")
        self.pool = pool
        self.listenerConnectionString = listenerConnectionString ?? pool.configuration.connectionString
        self.configuration = configuration
        self.routes = routes
        self.subscribers = subscribers.filter { routed.contains($0.key) }
        self.deliveryWakeups = Dictionary(uniqueKeysWithValues: routed.map { ($0, Wakeup()) })
        self.logger = logger
    }

    /// Delivers until the calling task is cancelled, woken by `NOTIFY` on ``Configuration/channel`` over its own
    /// listening connection.
    public func run() async throws(PostgresError) {
        let listener = try PostgresNotificationListener(
            connectionString: listenerConnectionString, channels: [configuration.channel], logger: logger)
        await deliver(listener: listener)
    }

    /// Delivers until the calling task is cancelled, without a listening connection of its own: for a process that
    /// shares one, and calls ``notified()`` for every event of ``Configuration/channel`` (and every (re)connection).
    public func runWithoutListening() async {
        await deliver(listener: nil)
    }

    private func deliver(listener: PostgresNotificationListener?) async {
        await withTaskGroup(of: Void.self) { group in
            if let listener {
                group.addTask { await listener.run { [self] _ in notified() } }
            }
            for (name, subscriber) in subscribers {
                group.addTask { await self.runDelivery(to: name, subscriber) }
            }
            await runFanOut()
            group.cancelAll()
        }
    }

    /// Events were appended (or notifications may have been missed): fan out now. Quick, never blocks.
    public func notified() {
        fanOutWakeup.signal()
    }

    // MARK: Fan-out

    private func runFanOut() async {
        var failureDelay = configuration.initialRetryDelay
        var lastSweep: ContinuousClock.Instant?
        while !Task.isCancelled {
            var wait = configuration.safetyPollInterval
            do {
                let sweep = lastSweep.map { ContinuousClock.now - $0 >= Self.sweepInterval } ?? true
                try await fanOutPendingEvents(sweepingLeftovers: sweep)
                if sweep { lastSweep = .now }
                failureDelay = configuration.initialRetryDelay
            } catch is CancellationError {
                break
            } catch {
                logger.warning("outbox fan-out failed", metadata: ["error": "\(error)"])
                wait = min(wait, failureDelay)
                failureDelay = min(failureDelay * 2, configuration.maximumRetryDelay)
            }
            await fanOutWakeup.wait(timeout: wait)
        }
    }

    /// How often the fan-out also removes outbox rows whose deliveries are all done but which a crash left behind.
    static let sweepInterval: Duration = .seconds(60)

    /// Gives every outbox row not yet fanned out its deliveries, wakes the subscribers that got some, and removes
    /// rows nobody subscribes to. Returns at once when another replica's relay is fanning out (its subscribers'
    /// loops are woken anyway: this replica's may hold their locks).
    ///
    /// - Parameter sweepingLeftovers: also delete fanned-out rows without deliveries: a delivery loop deletes the
    ///   outbox row right after the last delivery row, in a statement of its own, so a crash in between leaves it.
    public func fanOutPendingEvents(sweepingLeftovers: Bool = false) async throws {
        let lockKey = Self.lockKey(schema: configuration.schema)
        var woken: Set<String> = []
        defer { for name in woken { deliveryWakeups[name]?.signal() } }
        var sweep = sweepingLeftovers
        while true {
            let batch = try await pool.transaction { tx -> (rows: Int, subscribers: Set<String>)? in
                // Transaction-level: released by the commit. The same key the relay of the previous release took
                // for its whole pass, so the two never work on the outbox at once during a rolling upgrade.
                let locked = try await tx.queryRow("SELECT pg_try_advisory_xact_lock(\(lockKey))")
                guard try locked?.decode(0, as: Bool.self) == true else { return nil }
                if sweep {
                    try await tx.execute(
                        """
                        DELETE FROM outbox o WHERE fanned_out \
                        AND NOT EXISTS (SELECT FROM outbox_deliveries d WHERE d.sequence = o.sequence)
                        """)
                }
                let rows = try await tx.query(
                    """
                    SELECT sequence, event_type FROM outbox WHERE NOT fanned_out ORDER BY sequence \
                    LIMIT \(configuration.batchSize) FOR UPDATE
                    """)
                var deliverySubscribers: [String] = []
                var deliverySequences: [Int64] = []
                var fannedOut: [Int64] = []
                var unrouted: [Int64] = []
                for row in rows {
                    let sequence = try row.decode(0, as: Int64.self)
                    let names = subscribers(ofType: try row.decode(1, as: String.self))
                    if names.isEmpty {
                        unrouted.append(sequence)
                        continue
                    }
                    fannedOut.append(sequence)
                    for name in names {
                        deliverySubscribers.append(name)
                        deliverySequences.append(sequence)
                    }
                }
                if !deliverySequences.isEmpty {
                    try await tx.execute(
                        """
                        INSERT INTO outbox_deliveries (subscriber, sequence) \
                        SELECT * FROM unnest(\(deliverySubscribers)::text[], \(deliverySequences)::int8[]) \
                        ON CONFLICT DO NOTHING
                        """)
                    try await tx.execute(
                        "UPDATE outbox SET fanned_out = true WHERE sequence = ANY(\(fannedOut)::int8[])")
                }
                if !unrouted.isEmpty {
                    try await tx.execute("DELETE FROM outbox WHERE sequence = ANY(\(unrouted)::int8[])")
                }
                return (rows.count, Set(deliverySubscribers))
            }
            sweep = false
            guard let batch else {
                woken = Set(deliveryWakeups.keys)
                return
            }
            woken.formUnion(batch.subscribers)
            if batch.rows < configuration.batchSize { return }
        }
    }

    private func subscribers(ofType type: String) -> [String] {
        let named = (routes[type] ?? []) + (routes["*"] ?? [])
        var seen: Set<String> = []
        return named.filter { seen.insert($0).inserted }
    }

    // MARK: Delivery

    /// What one delivery pass to a subscriber ended with.
    enum PassOutcome {
        /// Everything due was tried; `nextDue` is when the earliest waiting retry is due (`nil`: none waits).
        case finished(nextDue: Duration?)
        /// The subscriber could not be reached: the pass stopped there, and the subscriber waits `retryIn`.
        case unreachable(retryIn: Duration)
        /// Another replica's relay is delivering to this subscriber.
        case lockedElsewhere
    }

    private func runDelivery(to name: String, _ subscriber: any OutboxSubscriber) async {
        guard let wakeup = deliveryWakeups[name] else { return }
        var unreachablePasses = 0
        var failedPasses = 0
        var idleWait = configuration.safetyPollInterval
        if configuration.observe != nil { idleWait = min(idleWait, configuration.observationInterval) }
        while !Task.isCancelled {
            var wait = idleWait
            var backOff: Duration?
            do {
                switch try await deliverPendingEvents(to: name, subscriber, unreachablePasses: unreachablePasses) {
                case .finished(let nextDue):
                    unreachablePasses = 0
                    if let nextDue { wait = min(wait, nextDue) }
                case .unreachable(let retryIn):
                    unreachablePasses += 1
                    backOff = retryIn
                case .lockedElsewhere:
                    // Its holder may be in its last batch already: look again soon, to take over if it stopped.
                    wait = min(wait, .seconds(2))
                }
                failedPasses = 0
            } catch is CancellationError {
                break
            } catch {
                failedPasses += 1
                logger.warning("outbox delivery pass failed", metadata: ["subscriber": "\(name)", "error": "\(error)"])
                wait = min(wait, retryDelay(afterAttempts: failedPasses))
            }
            await observeBacklog(of: name)
            if let backOff {
                // Not woken by new events: an unreachable subscriber is tried again after the delay, not per event.
                do { try await Task.sleep(for: backOff) } catch { break }
            } else {
                await wakeup.wait(timeout: wait)
            }
        }
    }

    /// One delivery pass to `name`: everything due, in sequence order, skipping aggregates whose earlier event is
    /// waiting for a retry; stops at the first ``OutboxSubscriberUnreachable``.
    func deliverPendingEvents(
        to name: String, _ subscriber: any OutboxSubscriber, unreachablePasses: Int
    ) async throws -> PassOutcome {
        let lockKey = Self.lockKey(schema: configuration.schema, subscriber: name)
        return try await pool.withConnection { connection in
            let locked = try await connection.queryRow("SELECT pg_try_advisory_lock(\(lockKey))")
            guard try locked?.decode(0, as: Bool.self) == true else { return .lockedElsewhere }
            do {
                let outcome = try await deliverLocked(
                    to: name, subscriber, unreachablePasses: unreachablePasses, connection: connection)
                try await connection.releaseAdvisoryLock(lockKey)
                return outcome
            } catch {
                // Also on cancellation: the lock must not stay with the pooled connection.
                try? await connection.releaseAdvisoryLock(lockKey)
                throw error
            }
        }
    }

    private func deliverLocked(
        to name: String, _ subscriber: any OutboxSubscriber, unreachablePasses: Int, connection: PostgresConnection
    ) async throws -> PassOutcome {
        var nextDue: Date?
        var afterSequence: Int64 = 0
        var blockedAggregates: Set<String> = []
        while true {
            let rows = try await connection.query(
                """
                SELECT d.sequence, d.attempts, d.next_attempt_at, d.next_attempt_at <= now() AS due, o.id, \
                o.aggregate_type, o.aggregate_id, o.event_type, o.occurred_at, o.payload \
                FROM outbox_deliveries d JOIN outbox o ON o.sequence = d.sequence \
                WHERE d.subscriber = \(name) AND d.sequence > \(afterSequence) \
                ORDER BY d.sequence LIMIT \(configuration.batchSize)
                """)
            for row in rows {
                let sequence = try row.decode("sequence", as: Int64.self)
                afterSequence = sequence
                let aggregateType = try row.decode("aggregate_type", as: String.self)
                let aggregateID = try row.decode("aggregate_id", as: String.self)
                let aggregate = "\(aggregateType)\u{0}\(aggregateID)"
                if blockedAggregates.contains(aggregate) { continue }
                guard try row.decode("due", as: Bool.self) else {
                    // An earlier failure's backoff: this aggregate waits, later events of it too.
                    blockedAggregates.insert(aggregate)
                    let due = try row.decode("next_attempt_at", as: Date.self)
                    nextDue = min(nextDue ?? due, due)
                    continue
                }
                var envelope = Habitflow_Events_V1_EventEnvelope()
                envelope.id = try row.decode("id", as: UUID.self).lowercasedString
                envelope.type = try row.decode("event_type", as: String.self)
                envelope.aggregateType = aggregateType
                envelope.aggregateID = aggregateID
                envelope.occurredAt = Google_Protobuf_Timestamp(date: try row.decode("occurred_at", as: Date.self))
                envelope.payload = try row.decode("payload", as: Data.self)
                envelope.source = configuration.source
                envelope.sequence = sequence
                do {
                    try await subscriber.deliver(envelope)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    let attempts = try row.decode("attempts", as: Int32.self) + 1
                    let unreachable = error is OutboxSubscriberUnreachable
                    // Unreachable: the whole subscriber waits (the count of such passes sets the delay), this event
                    // with it; otherwise this event's own attempts do.
                    let delay = retryDelay(afterAttempts: unreachable ? unreachablePasses + 1 : Int(attempts))
                    logger.warning(
                        unreachable
                            ? "outbox subscriber unreachable; will retry" : "outbox delivery failed; will retry",
                        metadata: [
                            "subscriber": "\(name)", "event": "\(envelope.id)", "type": "\(envelope.type)",
                            "attempts": "\(attempts)", "retryIn": "\(delay)", "error": "\(error)",
                        ])
                    try await connection.execute(
                        """
                        UPDATE outbox_deliveries SET attempts = \(attempts), \
                        next_attempt_at = now() + make_interval(secs => \(delay.microseconds)::float8 / 1000000), \
                        last_error = \(String(describing: error).prefix(500).description) \
                        WHERE subscriber = \(name) AND sequence = \(sequence)
                        """)
                    if unreachable { return .unreachable(retryIn: delay) }
                    blockedAggregates.insert(aggregate)
                    let due = Date().addingTimeInterval(Double(delay.microseconds) / 1_000_000)
                    nextDue = min(nextDue ?? due, due)
                    continue
                }
                try await connection.execute(
                    "DELETE FROM outbox_deliveries WHERE subscriber = \(name) AND sequence = \(sequence)")
                // A statement of its own, after the delete above committed: of two subscribers finishing the same
                // event at once, the later check sees both deletes. (In one statement or transaction, each could
                // still see the other's row and leave the outbox row behind.)
                try await connection.execute(
                    """
                    DELETE FROM outbox WHERE sequence = \(sequence) AND fanned_out \
                    AND NOT EXISTS (SELECT FROM outbox_deliveries WHERE sequence = \(sequence))
                    """)
                logger.debug(
                    "delivered outbox event",
                    metadata: ["subscriber": "\(name)", "event": "\(envelope.id)", "type": "\(envelope.type)"])
            }
            if rows.count < configuration.batchSize { break }
        }
        return .finished(nextDue: nextDue.map { .milliseconds(max(10, Int64($0.timeIntervalSinceNow * 1000))) })
    }

    /// Reports `name`'s backlog to ``Configuration/observe``, if set. A failure is logged: it must not stop delivery.
    private func observeBacklog(of name: String) async {
        guard let observe = configuration.observe else { return }
        do {
            let row = try await pool.queryRow(
                """
                SELECT (SELECT count(*) FROM outbox_deliveries WHERE subscriber = \(name)) AS backlog, \
                (SELECT (extract(epoch FROM now() - o.occurred_at) * 1000)::int8 \
                FROM outbox_deliveries d JOIN outbox o ON o.sequence = d.sequence \
                WHERE d.subscriber = \(name) ORDER BY d.sequence LIMIT 1) AS oldest_age_ms
                """)
            let backlog = try row?.decode("backlog", as: Int.self) ?? 0
            let oldestAge = try row?.decode("oldest_age_ms", as: Int64?.self) ?? 0
            observe(name, backlog, .milliseconds(max(0, oldestAge)))
        } catch is CancellationError {
        } catch {
            logger.warning("outbox backlog query failed", metadata: ["subscriber": "\(name)", "error": "\(error)"])
        }
    }

    /// `initial × 2^(attempts-1)`, capped, with ±25 % jitter so failing replicas do not retry in lockstep.
    func retryDelay(afterAttempts attempts: Int) -> Duration {
        let exponent = Double(min(max(attempts - 1, 0), 30))
        let base = min(configuration.initialRetryDelay * pow(2, exponent), configuration.maximumRetryDelay)
        return base * Double.random(in: 0.75...1.25)
    }

    /// The fan-out's lock: the key the relay of the previous release held for its whole pass.
    static func lockKey(schema: String) -> Int64 {
        PostgresConnection.advisoryLockKey(named: "habitflow.outbox.\(schema)")
    }

    static func lockKey(schema: String, subscriber: String) -> Int64 {
        PostgresConnection.advisoryLockKey(named: "habitflow.outbox.\(schema).delivery.\(subscriber)")
    }
}

extension Duration {
    fileprivate var microseconds: Int64 {
        components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000
    }
}
