import HabitFlowTestSupport
import Foundation
import HabitFlowEvents
import HabitFlowOutbox
import HabitFlowPostgres
import Synchronization
import Testing

/// An in-process subscriber: applies each event once (inbox), recording its effects per aggregate in order.
private struct InProcessSubscriber: OutboxSubscriber {
    let pool: PostgresPool
    /// Its name in the routes, its inbox consumer and the `subscriber` of its effects.
    let name: String
    /// Called after the consumer committed, before `deliver` returns: the place a crash would hurt.
    let afterCommit: @Sendable (Habitflow_Events_V1_EventEnvelope) async throws -> Void
    let failuresLeft: Shared<Int>
    /// An error to fail the delivery with instead of applying it (a stopped subscriber, a poison event).
    let failure: @Sendable (Habitflow_Events_V1_EventEnvelope) -> (any Error)?
    /// Every delivery attempt, failed ones included.
    let attempts = Shared(0)

    init(
        pool: PostgresPool, name: String = "outbox-test", failFirst: Int = 0,
        afterCommit: @escaping @Sendable (Habitflow_Events_V1_EventEnvelope) async throws -> Void = { _ in },
        failure: @escaping @Sendable (Habitflow_Events_V1_EventEnvelope) -> (any Error)? = { _ in nil }
    ) {
        self.pool = pool
        self.name = name
        self.afterCommit = afterCommit
        self.failure = failure
        failuresLeft = Shared(failFirst)
    }

    func deliver(_ envelope: Habitflow_Events_V1_EventEnvelope) async throws {
        attempts.update { $0 += 1 }
        if failuresLeft.update({ $0 -= 1; return $0 }) >= 0 { throw SubscriberDown() }
        if let error = failure(envelope) { throw error }
        try await pool.processEventOnce(envelope, consumer: name) { tx in
            try await tx.execute(
                """
                INSERT INTO outbox_test_effects (subscriber, event_id, aggregate_id, sequence) \
                VALUES (\(name), \(UUID(uuidString: envelope.id)!), \(envelope.aggregateID), \(envelope.sequence))
                """)
        }
        try await afterCommit(envelope)
    }
}

/// A relay that routes every event type to each of `subscribers`.
private func makeRelay(
    _ pool: PostgresPool, _ configuration: OutboxRelay.Configuration = OutboxRelay.Configuration(schema: "social"),
    _ subscribers: InProcessSubscriber...
) -> OutboxRelay {
    OutboxRelay(
        pool: pool, configuration: configuration, routes: ["*": subscribers.map(\.name)],
        subscribers: Dictionary(uniqueKeysWithValues: subscribers.map { ($0.name, $0 as any OutboxSubscriber) }),
        logger: testLogger)
}

private struct SubscriberDown: Error {}

/// The social schema with its migrations, an effects table and an empty outbox.
private func prepareSocialSchema(_ pool: PostgresPool) async throws {
    let directory = (TestEnvironment.sqlRoot as NSString).appendingPathComponent("social")
    try await PostgresMigrations.migrate(
        service: "social", pool: pool, directory: directory, libraryMigrations: LibraryMigrations.all,
        logger: testLogger)
    try await pool.execute("DROP TABLE IF EXISTS outbox_test_effects")
    try await pool.execute(
        """
        CREATE TABLE outbox_test_effects (
            applied bigint GENERATED ALWAYS AS IDENTITY, subscriber text NOT NULL, event_id uuid NOT NULL,
            aggregate_id text NOT NULL, sequence int8 NOT NULL)
        """)
    try await pool.execute("DELETE FROM outbox")  // and its deliveries (ON DELETE CASCADE)
    try await pool.execute("DELETE FROM processed_events")
}

private func appendEvents(_ pool: PostgresPool, aggregate: String, count: Int) async throws -> [UUID] {
    var ids: [UUID] = []
    for index in 0..<count {
        let event = OutboxEvent(
            type: "habitflow.test.v1.Thing", aggregateType: "user", aggregateID: aggregate, payload: Data([UInt8(index)]))
        try await pool.transaction { tx in
            try await tx.execute("SELECT 1")  // stands for the service's own writes
            try await tx.appendToOutbox(event)
        }
        ids.append(event.id)
    }
    return ids
}

/// What `subscriber` applied, in the order it applied it (one subscriber applies one event at a time).
private func effects(
    _ pool: PostgresPool, of subscriber: String = "outbox-test"
) async throws -> [(aggregate: String, sequence: Int64)] {
    try await pool.query(
        "SELECT aggregate_id, sequence FROM outbox_test_effects WHERE subscriber = \(subscriber) ORDER BY applied"
    ).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self)) }
}

/// Whether each aggregate's events were applied in sequence order.
private func inOrderPerAggregate(_ effects: [(aggregate: String, sequence: Int64)]) -> Bool {
    Dictionary(grouping: effects, by: \.aggregate).values.allSatisfy { events in
        events.map(\.sequence) == events.map(\.sequence).sorted()
    }
}

private func outboxCount(_ pool: PostgresPool) async throws -> Int {
    try await pool.queryRow("SELECT count(*) FROM outbox")!.decode(0, as: Int.self)
}

extension PostgresIntegrationTests {
    @Suite("transactional outbox")
    struct OutboxTests {
        @Test("an appended event is delivered promptly (NOTIFY, no polling) and a rolled-back one never")
        func promptDelivery() async throws {
            try await withPool(try TestEnvironment.serviceURL("social")) { pool in
                try await prepareSocialSchema(pool)
                var configuration = OutboxRelay.Configuration(schema: "social")
                configuration.safetyPollInterval = .seconds(60)  // only a notification can wake it in time
                let relay = makeRelay(pool, configuration, InProcessSubscriber(pool: pool))
                let running = Task { try await relay.run() }
                defer { running.cancel() }
                try await Task.sleep(for: .milliseconds(300))  // let it LISTEN and find the outbox empty

                await #expect(throws: SubscriberDown.self) {
                    try await pool.transaction { tx in
                        try await tx.appendToOutbox(OutboxEvent(type: "t", aggregateType: "user", aggregateID: "never", payload: Data()))
                        throw SubscriberDown()
                    }
                }
                let started = ContinuousClock.now
                let ids = try await appendEvents(pool, aggregate: "u1", count: 3)
                #expect(try await eventually(timeout: .seconds(5)) { try await effects(pool).count == 3 })
                #expect(ContinuousClock.now - started < .seconds(5))
                #expect(try await effects(pool).map(\.aggregate) == ["u1", "u1", "u1"])
                #expect(try await eventually { try await outboxCount(pool) == 0 })
                let processed = try await pool.query("SELECT event_id FROM processed_events").map { try $0.decode(0, as: UUID.self) }
                #expect(Set(processed) == Set(ids))
                running.cancel()
                _ = await running.result
            }
        }

        @Test("a failing subscriber gets retries with backoff, and per-aggregate order holds")
        func retryInOrder() async throws {
            try await withPool(try TestEnvironment.serviceURL("social")) { pool in
                try await prepareSocialSchema(pool)
                _ = try await appendEvents(pool, aggregate: "a", count: 3)
                _ = try await appendEvents(pool, aggregate: "b", count: 2)
                var configuration = OutboxRelay.Configuration(schema: "social")
                configuration.initialRetryDelay = .milliseconds(50)
                let relay = makeRelay(pool, configuration, InProcessSubscriber(pool: pool, failFirst: 3))
                let running = Task { try await relay.run() }
                defer { running.cancel() }
                #expect(try await eventually(timeout: .seconds(10)) { try await effects(pool).count == 5 })
                let delivered = try await effects(pool)
                for aggregate in ["a", "b"] {
                    let sequences = delivered.filter { $0.aggregate == aggregate }.map(\.sequence)
                    #expect(sequences == sequences.sorted(), "aggregate \(aggregate) out of order")
                }
                #expect(try await eventually { try await outboxCount(pool) == 0 })
                running.cancel()
                _ = await running.result
            }
        }

        @Test("a crash between the subscriber's commit and the relay's bookkeeping: redelivered, processed once")
        func crashAfterCommit() async throws {
            try await withPool(try TestEnvironment.serviceURL("social")) { pool in
                try await prepareSocialSchema(pool)
                let ids = try await appendEvents(pool, aggregate: "crash", count: 1)

                // First relay: the subscriber commits the effect, then the relay dies before it records delivery.
                let crashed = Shared(false)
                let firstRelayBox = Shared<Task<Void, any Error>?>(nil)
                let crashingSubscriber = InProcessSubscriber(pool: pool) { _ in
                    crashed.value = true
                    firstRelayBox.value?.cancel()
                    throw CancellationError()
                }
                let firstRelay = makeRelay(pool, OutboxRelay.Configuration(schema: "social"), crashingSubscriber)
                let firstTask = Task { try await firstRelay.run() }
                firstRelayBox.value = firstTask
                #expect(try await eventually { crashed.value })
                _ = await firstTask.result
                #expect(try await effects(pool).count == 1)
                #expect(try await outboxCount(pool) == 1, "the crashed relay must not have recorded the delivery")

                // Restarted relay: delivers again; the consumer recognises the event id and does nothing more.
                let redeliveries = Shared(0)
                let subscriber = InProcessSubscriber(pool: pool) { _ in redeliveries.update { $0 += 1 } }
                let secondRelay = makeRelay(pool, OutboxRelay.Configuration(schema: "social"), subscriber)
                let secondTask = Task { try await secondRelay.run() }
                defer { secondTask.cancel() }
                #expect(try await eventually { try await outboxCount(pool) == 0 })
                #expect(redeliveries.value == 1)
                #expect(try await effects(pool).count == 1)
                let processed = try await pool.query("SELECT event_id FROM processed_events").map { try $0.decode(0, as: UUID.self) }
                #expect(processed == ids)
                secondTask.cancel()
                _ = await secondTask.result
            }
        }

        @Test("a stopped subscriber delays only itself, and gets its whole backlog in order soon after it is back")
        func stoppedSubscriberDelaysOnlyItself() async throws {
            try await withPool(try TestEnvironment.serviceURL("social"), maximumConnections: 8) { pool in
                try await prepareSocialSchema(pool)
                let stopped = Shared(true)
                let up = InProcessSubscriber(pool: pool, name: "up")
                let down = InProcessSubscriber(
                    pool: pool, name: "down",
                    // What RPCEventSubscriber throws for UNAVAILABLE.
                    failure: { _ in stopped.value ? OutboxSubscriberUnreachable(SubscriberDown()) : nil })
                let observed = Shared<[String: (backlog: Int, oldestAge: Duration)]>([:])
                var configuration = OutboxRelay.Configuration(schema: "social")  // the default backoff: its cap counts
                configuration.observe = { subscriber, backlog, oldestAge in
                    observed.update { $0[subscriber] = (backlog, oldestAge) }
                }
                configuration.observationInterval = .milliseconds(500)
                let relay = makeRelay(pool, configuration, up, down)
                let running = Task { try await relay.run() }
                defer { running.cancel() }

                var started = ContinuousClock.now
                for _ in 0..<4 {
                    for aggregate in ["a", "b", "c"] {
                        _ = try await appendEvents(pool, aggregate: aggregate, count: 1)
                    }
                }
                #expect(try await eventually(timeout: .seconds(10)) { try await effects(pool, of: "up").count == 12 })
                #expect(ContinuousClock.now - started < .seconds(2), "the stopped subscriber held the other back")
                #expect(inOrderPerAggregate(try await effects(pool, of: "up")))

                // Down long enough for its backoff to reach the cap (0.2 + 0.4 + 0.8 + 1.6 + 3.2 s of attempts),
                // with more events meanwhile.
                #expect(try await eventually(timeout: .seconds(30)) { down.attempts.value >= 6 })
                for aggregate in ["c", "a"] { _ = try await appendEvents(pool, aggregate: aggregate, count: 1) }
                #expect(try await eventually { try await effects(pool, of: "up").count == 14 })
                #expect(try await effects(pool, of: "down").isEmpty)
                #expect(try await outboxCount(pool) == 14, "an event leaves the outbox once every subscriber has it")
                #expect(
                    try await eventually {
                        guard let down = observed.value["down"], let up = observed.value["up"] else { return false }
                        return down.backlog == 14 && down.oldestAge > .zero && up.backlog == 0
                    })
                let lastError = try await pool.queryRow(
                    "SELECT max(attempts), max(last_error) FROM outbox_deliveries WHERE subscriber = 'down'")
                #expect(try lastError?.decode(0, as: Int32.self) ?? 0 >= 1)
                #expect(try lastError?.decode(1, as: String?.self)?.contains("unreachable") == true)

                stopped.value = false
                started = ContinuousClock.now
                #expect(try await eventually(timeout: .seconds(20)) { try await effects(pool, of: "down").count == 14 })
                #expect(ContinuousClock.now - started < .seconds(10), "the backlog came too late after the outage")
                let downEffects = try await effects(pool, of: "down")
                #expect(inOrderPerAggregate(downEffects))
                #expect(Set(downEffects.map(\.sequence)) == Set(try await effects(pool, of: "up").map(\.sequence)))
                #expect(try await eventually { try await outboxCount(pool) == 0 })
                #expect(
                    try await eventually {
                        observed.value["down"].map { $0.backlog == 0 && $0.oldestAge == .zero } == true
                    })
                running.cancel()
                _ = await running.result
            }
        }

        @Test("a poison event blocks only its aggregate, and only for the subscriber that fails it")
        func poisonEventBlocksOnlyItsAggregate() async throws {
            try await withPool(try TestEnvironment.serviceURL("social"), maximumConnections: 8) { pool in
                try await prepareSocialSchema(pool)
                struct Poisoned: Error {}
                let healed = Shared(false)
                let picky = InProcessSubscriber(
                    pool: pool, name: "picky",
                    failure: { envelope in envelope.aggregateID == "poison" && !healed.value ? Poisoned() : nil })
                let easy = InProcessSubscriber(pool: pool, name: "easy")
                var configuration = OutboxRelay.Configuration(schema: "social")
                configuration.initialRetryDelay = .milliseconds(50)
                let relay = makeRelay(pool, configuration, picky, easy)
                let running = Task { try await relay.run() }
                defer { running.cancel() }

                for aggregate in ["poison", "fine", "poison", "fine"] {
                    _ = try await appendEvents(pool, aggregate: aggregate, count: 1)
                }
                #expect(try await eventually { try await effects(pool, of: "easy").count == 4 })
                #expect(
                    try await eventually { try await effects(pool, of: "picky").map(\.aggregate) == ["fine", "fine"] })
                // Retried, not skipped: the first poison event is tried again and again; the second waits behind it.
                #expect(try await eventually { picky.attempts.value >= 5 })
                let waiting = try await pool.query(
                    """
                    SELECT d.attempts FROM outbox_deliveries d JOIN outbox o ON o.sequence = d.sequence \
                    WHERE d.subscriber = 'picky' ORDER BY d.sequence
                    """
                ).map { try $0.decode(0, as: Int32.self) }
                #expect(waiting.count == 2 && waiting[0] >= 2 && waiting[1] == 0)
                #expect(try await effects(pool, of: "picky").map(\.aggregate) == ["fine", "fine"])
                #expect(try await outboxCount(pool) == 2)

                healed.value = true
                #expect(try await eventually { try await effects(pool, of: "picky").count == 4 })
                #expect(inOrderPerAggregate(try await effects(pool, of: "picky")))
                #expect(try await eventually { try await outboxCount(pool) == 0 })
                running.cancel()
                _ = await running.result
            }
        }

        @Test("fan-out: an event routed to no one leaves the outbox; a row a crash left after its deliveries is swept")
        func fanOutRoutesAndSweeps() async throws {
            try await withPool(try TestEnvironment.serviceURL("social")) { pool in
                try await prepareSocialSchema(pool)
                let relay = OutboxRelay(
                    pool: pool, configuration: .init(schema: "social"),
                    routes: ["habitflow.test.v1.Thing": ["sub"], "habitflow.test.v1.Unwanted": []],
                    subscribers: ["sub": InProcessSubscriber(pool: pool, name: "sub")], logger: testLogger)
                _ = try await appendEvents(pool, aggregate: "a", count: 2)
                try await pool.transaction { tx in
                    try await tx.appendToOutbox(
                        OutboxEvent(type: "habitflow.test.v1.Unwanted", aggregateType: "user", aggregateID: "a", payload: Data()))
                    try await tx.appendToOutbox(
                        OutboxEvent(type: "habitflow.test.v1.Unknown", aggregateType: "user", aggregateID: "a", payload: Data()))
                }
                try await relay.fanOutPendingEvents()
                let fannedOut = try await pool.query(
                    "SELECT o.event_type, d.subscriber FROM outbox o JOIN outbox_deliveries d USING (sequence) ORDER BY 1"
                ).map { "\(try $0.decode(0, as: String.self)) → \(try $0.decode(1, as: String.self))" }
                #expect(fannedOut == ["habitflow.test.v1.Thing → sub", "habitflow.test.v1.Thing → sub"])
                #expect(try await outboxCount(pool) == 2)

                // As if a delivery loop died between deleting the last delivery and the outbox row.
                try await pool.execute("DELETE FROM outbox_deliveries")
                try await relay.fanOutPendingEvents()
                #expect(try await outboxCount(pool) == 2, "only the sweep removes them")
                try await relay.fanOutPendingEvents(sweepingLeftovers: true)
                #expect(try await outboxCount(pool) == 0)
            }
        }

        @Test("two replicas' relays: one delivers to a subscriber at a time, each event once, in order per aggregate")
        func replicas() async throws {
            try await withPool(try TestEnvironment.serviceURL("social"), maximumConnections: 8) { pool in
                try await prepareSocialSchema(pool)
                // Slow enough that the relays' passes overlap, which only the subscriber's lock keeps apart.
                let subscriber = InProcessSubscriber(pool: pool, name: "sub") { _ in
                    try await Task.sleep(for: .milliseconds(5))
                }
                // A backlog both find at start, then events while they run.
                for _ in 0..<10 {
                    for aggregate in ["a", "b"] { _ = try await appendEvents(pool, aggregate: aggregate, count: 1) }
                }
                let relays = (0..<2).map { _ in makeRelay(pool, .init(schema: "social"), subscriber) }
                let running = relays.map { relay in Task { try await relay.run() } }
                defer { for task in running { task.cancel() } }
                for _ in 0..<5 {
                    for aggregate in ["a", "b"] { _ = try await appendEvents(pool, aggregate: aggregate, count: 1) }
                }
                #expect(try await eventually { try await effects(pool, of: "sub").count == 30 })
                #expect(inOrderPerAggregate(try await effects(pool, of: "sub")))
                #expect(try await eventually { try await outboxCount(pool) == 0 })
                #expect(subscriber.attempts.value == 30, "an event was delivered twice")
                for task in running { task.cancel() }
                for task in running { _ = await task.result }
            }
        }
    }
}
