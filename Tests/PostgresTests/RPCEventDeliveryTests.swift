import HabitFlowTestSupport
import Foundation
import HabitFlowEvents
import HabitFlowOutbox
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import Testing

extension PostgresIntegrationTests {
    @Suite("outbox delivery over RPC")
    struct RPCEventDeliveryTests {
        // The publisher is the goals schema: the auth service's own tests run auth's relay (which would take these
        // events) and need auth's outbox left alone.
        @Test("goals' relay delivers to a subscribing service over RPC; a redelivery is acknowledged, not re-applied")
        func deliveryOverRPC() async throws {
            try await withPool(try TestEnvironment.serviceURL("goals")) { publisher in
                try await withPool(try TestEnvironment.serviceURL("habits")) { habits in
                    for (service, pool) in [("goals", publisher), ("habits", habits)] {
                        let directory = (TestEnvironment.sqlRoot as NSString).appendingPathComponent(service)
                        try await PostgresMigrations.migrate(
                            service: service, pool: pool, directory: directory, libraryMigrations: LibraryMigrations.all,
                            logger: testLogger)
                    }
                    try await publisher.execute("DELETE FROM outbox")
                    try await habits.execute("DROP TABLE IF EXISTS rpc_delivery_effects")
                    try await habits.execute("CREATE TABLE rpc_delivery_effects (event_id text PRIMARY KEY, aggregate_id text NOT NULL)")

                    // The subscriber: a real RPC server in front of the habits schema.
                    let subscriber = EventSubscriberService(pool: habits, consumer: "habits") { envelope, transaction in
                        try await transaction.execute(
                            "INSERT INTO rpc_delivery_effects (event_id, aggregate_id) VALUES (\(envelope.id), \(envelope.aggregateID))")
                    }
                    let server = RPCServer(configuration: .init(port: 0), services: [subscriber], logger: testLogger)
                    try await server.start()
                    let channel = try RPCChannel(
                        configuration: .init(host: "127.0.0.1", port: server.localAddress!.port!), logger: testLogger)
                    let client = Habitflow_Events_V1_EventSubscriber.Client(transport: channel)

                    let relay = OutboxRelay(
                        pool: publisher, configuration: .init(schema: "goals"), routes: ["*": ["habits"]],
                        subscribers: ["habits": RPCEventSubscriber(client: client)], logger: testLogger)
                    let running = Task { try await relay.run() }
                    let events = (0..<3).map { index in
                        OutboxEvent(
                            type: "habitflow.auth.v1.UserCreated", aggregateType: "user", aggregateID: "user-\(index)",
                            payload: Data([UInt8(index)]))
                    }
                    for event in events {
                        try await publisher.transaction { tx in try await tx.appendToOutbox(event) }
                    }
                    let delivered = try await eventually {
                        try await habits.queryRow("SELECT count(*) FROM rpc_delivery_effects")!.decode(0, as: Int.self) == 3
                    }
                    #expect(delivered)
                    #expect(try await eventually { try await publisher.queryRow("SELECT count(*) FROM outbox")!.decode(0, as: Int.self) == 0 })
                    running.cancel()

                    // At-least-once means repeats: the subscriber acknowledges them without applying twice.
                    var repeated = Habitflow_Events_V1_DeliverEventRequest()
                    repeated.event.id = events[0].id.uuidString.lowercased()
                    repeated.event.type = events[0].type
                    repeated.event.aggregateID = events[0].aggregateID
                    let response = try await client.deliver(repeated)
                    #expect(response.applied == false)
                    #expect(try await habits.queryRow("SELECT count(*) FROM rpc_delivery_effects")!.decode(0, as: Int.self) == 3)

                    await #expect(throws: RPCError.self) {
                        _ = try await client.deliver(Habitflow_Events_V1_DeliverEventRequest())
                    }
                    // A subscriber that is down is unreachable as a whole (the relay backs it off), not a failed event.
                    await server.shutdown()
                    await #expect(throws: OutboxSubscriberUnreachable.self) {
                        try await RPCEventSubscriber(client: client, timeout: .seconds(2)).deliver(repeated.event)
                    }
                    await channel.close()
                }
            }
        }
    }
}
