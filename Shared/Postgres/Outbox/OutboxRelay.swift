internal import Foundation
internal import HabitFlowEvents
public import HabitFlowPostgres
public import Logging
internal import HabitFlowCrypto
internal import SwiftProtobuf
internal import Synchronization

/// Delivers a service's outbox to an ``OutboxEventSink``: at least once, in order per aggregate, retrying failed
/// deliveries with exponential backoff.
///
/// It is woken by `NOTIFY` when an appending transaction commits (over a ``PostgresNotificationListener``), and
/// also looks every ``Configuration/safetyPollInterval`` in case a notification was lost. Among replicas, one relay
/// at a time delivers (a Postgres advisory lock per schema), so per-aggregate order holds across replicas.
/// A delivered event is deleted from the outbox after the sink returns: a crash in between means the event is
/// delivered again, which consumers absorb by event id.
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
        /// The delay after a first failed delivery, doubled per further failure up to ``maximumRetryDelay``.
        public var initialRetryDelay: Duration = .milliseconds(200)
        public var maximumRetryDelay: Duration = .seconds(60)

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
    private let sink: any OutboxEventSink
    private let logger: Logger
    private let wakeup = Wakeup()

    /// - Parameters:
    ///   - pool: connects as the service's role (its `search_path` is the service's schema).
    ///   - listenerConnectionString: for the relay's own `LISTEN` connection, normally the pool's.
    public init(
        pool: PostgresPool, listenerConnectionString: String? = nil, configuration: Configuration,
        sink: any OutboxEventSink, logger: Logger
    ) {
        self.pool = pool
        self.listenerConnectionString = listenerConnectionString ?? pool.configuration.connectionString
        self.configuration = configuration
        self.sink = sink
        self.logger = logger
    }

    /// Delivers until the calling task is cancelled.
    public func run() async throws {
        let listener = try PostgresNotificationListener(
            connectionString: listenerConnectionString, channels: [configuration.channel], logger: logger)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await listener.run() }
            group.addTask { [wakeup] in
                for await _ in listener.events { wakeup.signal() }
            }
            var failureDelay = Duration.milliseconds(500)
            while !Task.isCancelled {
                var wait = configuration.safetyPollInterval
                do {
                    if let nextDue = try await deliverPendingEvents() { wait = min(wait, nextDue) }
                    failureDelay = .milliseconds(500)
                } catch is CancellationError {
                    break
                } catch {
                    logger.warning("outbox relay pass failed", metadata: ["error": "\(error)"])
                    wait = min(wait, failureDelay)
                    failureDelay = min(failureDelay * 2, configuration.safetyPollInterval)
                }
                await wakeup.wait(timeout: wait)
            }
            group.cancelAll()
        }
    }

    /// One delivery pass: everything due, in sequence order, skipping aggregates whose earlier event is waiting for a
    /// retry. Returns how long until the next retry is due (`nil`: nothing is waiting), or `nil` at once when another
    /// replica's relay holds the lock.
    @discardableResult
    public func deliverPendingEvents() async throws -> Duration? {
        let lockKey = Self.lockKey(schema: configuration.schema)
        return try await pool.withConnection { connection in
            guard try await connection.queryRow("SELECT pg_try_advisory_lock(\(lockKey))")?.decode(0, as: Bool.self) == true
            else { return configuration.safetyPollInterval }
            do {
                let nextDue = try await deliverLocked(connection)
                try await connection.releaseAdvisoryLock(lockKey)
                return nextDue
            } catch {
                // Also on cancellation: the lock must not stay with the pooled connection.
                try? await connection.releaseAdvisoryLock(lockKey)
                throw error
            }
        }
    }

    private func deliverLocked(_ connection: PostgresConnection) async throws -> Duration? {
        var nextDue: Date?
        var afterSequence: Int64 = 0
        var blockedAggregates: Set<String> = []
        while true {
            let rows = try await connection.query(
                """
                SELECT sequence, id, aggregate_type, aggregate_id, event_type, occurred_at, payload, attempts, \
                next_attempt_at, next_attempt_at <= now() AS due \
                FROM outbox WHERE sequence > \(afterSequence) ORDER BY sequence LIMIT \(configuration.batchSize)
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
                    try await sink.deliver(envelope)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    let attempts = try row.decode("attempts", as: Int32.self) + 1
                    let delay = retryDelay(afterAttempts: Int(attempts))
                    logger.warning(
                        "outbox delivery failed; will retry",
                        metadata: [
                            "event": "\(envelope.id)", "type": "\(envelope.type)", "attempts": "\(attempts)",
                            "retryIn": "\(delay)", "error": "\(error)",
                        ])
                    let delayMicroseconds = delay.components.seconds * 1_000_000
                        + delay.components.attoseconds / 1_000_000_000_000
                    try await connection.execute(
                        """
                        UPDATE outbox SET attempts = \(attempts), \
                        next_attempt_at = now() + make_interval(secs => \(delayMicroseconds)::float8 / 1000000), \
                        last_error = \(String(describing: error).prefix(500).description) WHERE sequence = \(sequence)
                        """)
                    blockedAggregates.insert(aggregate)
                    let due = Date().addingTimeInterval(Double(delayMicroseconds) / 1_000_000)
                    nextDue = min(nextDue ?? due, due)
                    continue
                }
                try await connection.execute("DELETE FROM outbox WHERE sequence = \(sequence)")
                logger.debug("delivered outbox event", metadata: ["event": "\(envelope.id)", "type": "\(envelope.type)"])
            }
            if rows.count < configuration.batchSize { break }
        }
        return nextDue.map { .milliseconds(max(10, Int64($0.timeIntervalSinceNow * 1000))) }
    }

    /// `initial × 2^(attempts-1)`, capped, with ±25 % jitter so failing replicas do not retry in lockstep.
    func retryDelay(afterAttempts attempts: Int) -> Duration {
        let exponent = Double(min(attempts - 1, 30))
        let base = min(configuration.initialRetryDelay * pow(2, exponent), configuration.maximumRetryDelay)
        return base * Double.random(in: 0.75...1.25)
    }

    static func lockKey(schema: String) -> Int64 {
        SHA256.hash(Array("habitflow.outbox.\(schema)".utf8)).prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}

/// Wakes one waiting task, or the next one to wait if none is waiting; a wait also ends at a timeout.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiterID = 0
        var waiter: CheckedContinuation<Void, Never>?
        /// The current wait's timeout or cancellation came before it registered its continuation.
        var firedID: Int?
    }

    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at a signal (including one that came since the last wait), at the timeout or on cancellation.
    func wait(timeout: Duration) async {
        let id = state.withLock { state -> Int in
            state.waiterID += 1
            state.firedID = nil
            return state.waiterID
        }
        let timer = Task { [self] in
            try? await Task.sleep(for: timeout)
            end(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || state.firedID == id {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            end(id)
        }
        timer.cancel()
    }

    private func end(_ id: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.waiterID == id else { return nil }
            guard let waiter = state.waiter else {
                state.firedID = id
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }
}
