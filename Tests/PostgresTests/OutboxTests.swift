import HabitFlowTestSupport
import Foundation
import HabitFlowEvents
import HabitFlowOutbox
import HabitFlowPostgres
import Synchronization
import Testing

/// An in-process subscriber: applies each event once (inbox), counting effects per aggregate in order.
private struct InProcessSink: OutboxEventSink {
    let pool: PostgresPool
    /// Called after the consumer committed, before `deliver` returns: the place a crash would hurt.
    let afterCommit: @Sendable (Habitflow_Events_V1_EventEnvelope) async throws -> Void
    let failuresLeft: Shared<Int>

    init(
        pool: PostgresPool, failFirst: Int = 0,
        afterCommit: @escaping @Sendable (Habitflow_Events_V1_EventEnvelope) async throws -> Void = { _ in }
    ) {
        self.pool = pool
        self.afterCommit = afterCommit
        failuresLeft = Shared(failFirst)
    }

    func deliver(_ envelope: Habitflow_Events_V1_EventEnvelope) async throws {
        if failuresLeft.update({ $0 -= 1; return $0 }) >= 0 { throw SubscriberDown() }
        try await pool.processEventOnce(envelope, consumer: "outbox-test") { tx in
            try await tx.execute(
                """
                INSERT INTO outbox_test_effects (event_id, aggregate_id, sequence) \
                VALUES (\(UUID(uuidString: envelope.id)!), \(envelope.aggregateID), \(envelope.sequence))
                """)
        }
        try await afterCommit(envelope)
    }
}

private struct SubscriberDown: Error {}

/// The social schema with its migrations, an effects table and an empty outbox.
private func prepareSocialSchema(_ pool: PostgresPool) async throws {
    let directory = (TestEnvironment.sqlRoot as NSString).appendingPathComponent("social")
    try await PostgresMigrations.migrate(service: "social", pool: pool, directory: directory, logger: testLogger)
    try await pool.execute("DROP TABLE IF EXISTS outbox_test_effects")
    try await pool.execute(
        "CREATE TABLE outbox_test_effects (event_id uuid NOT NULL, aggregate_id text NOT NULL, sequence int8 NOT NULL)")
    try await pool.execute("DELETE FROM outbox")
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

private func effects(_ pool: PostgresPool) async throws -> [(aggregate: String, sequence: Int64)] {
    try await pool.query("SELECT aggregate_id, sequence FROM outbox_test_effects ORDER BY sequence").map {
        (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self))
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
                let relay = OutboxRelay(pool: pool, configuration: configuration, sink: InProcessSink(pool: pool), logger: testLogger)
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
                let sink = InProcessSink(pool: pool, failFirst: 3)
                let relay = OutboxRelay(pool: pool, configuration: configuration, sink: sink, logger: testLogger)
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
                let crashingSink = InProcessSink(pool: pool) { _ in
                    crashed.value = true
                    firstRelayBox.value?.cancel()
                    throw CancellationError()
                }
                let firstRelay = OutboxRelay(
                    pool: pool, configuration: OutboxRelay.Configuration(schema: "social"), sink: crashingSink, logger: testLogger)
                let firstTask = Task { try await firstRelay.run() }
                firstRelayBox.value = firstTask
                #expect(try await eventually { crashed.value })
                _ = await firstTask.result
                #expect(try await effects(pool).count == 1)
                #expect(try await outboxCount(pool) == 1, "the crashed relay must not have recorded the delivery")

                // Restarted relay: delivers again; the consumer recognises the event id and does nothing more.
                let redeliveries = Shared(0)
                let sink = InProcessSink(pool: pool) { _ in redeliveries.update { $0 += 1 } }
                let secondRelay = OutboxRelay(
                    pool: pool, configuration: OutboxRelay.Configuration(schema: "social"), sink: sink, logger: testLogger)
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
    }
}
