import HabitFlowInternalCredential
import Foundation
import GRPCInteropTesting
import HabitFlowEvents
import HabitFlowGRPCSideServiceProtos
import HabitFlowOutbox
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import HabitFlowTestSupport
import Logging
import SwiftProtobuf
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let testLogger: Logger = {
    var logger = Logger(label: "service-kit-tests")
    logger.logLevel = .warning
    return logger
}()

/// The interop TestService with one method that reports who the kit says is calling.
struct IdentityEchoService: RPCService {
    let base = InteropTestService()
    var serviceName: String { base.serviceName }
    var methods: [ServerMethod] {
        base.methods.map { method in
            guard method.descriptor.method == "UnaryCall" else { return method }
            return .unary(method.descriptor) { (request: Grpc_Testing_SimpleRequest, _: ServerContext) in
                if request.responseStatus.code == 13 { throw DatabaseLikeFailure() }
                var response = Grpc_Testing_SimpleResponse()
                let identity = CallerIdentity.current
                response.username = [
                    identity?.caller ?? "-", try CallerIdentity.requireUser().uuidString.lowercased(),
                    identity?.sessionID ?? "-", identity?.clientAddress ?? "-",
                ].joined(separator: "|")
                return response
            }
        }
    }
}

struct DatabaseLikeFailure: Error, CustomStringConvertible {
    var description: String { "SELECT secret FROM internals" }
}

func startHost(_ definition: ServiceDefinition, databaseURL: String? = nil, secret: String = "kit-secret",
               metrics: Bool = false, addresses: [String: [RPCChannelConfiguration.Target]] = [:]) async throws -> ServiceHost {
    var configuration = ServiceConfiguration(
        service: definition.name, port: 0, databaseURL: databaseURL, sqlDirectory: TestEnvironment.sqlRoot,
        internalSecret: secret)
    configuration.metricsPort = metrics ? 0 : nil
    configuration.serviceAddresses = addresses
    return try await ServiceHost.start(definition, configuration: configuration, logger: testLogger)
}

func channel(to host: ServiceHost, signedWith secret: String?, caller: String = "gateway") throws -> RPCChannel {
    let interceptors: [any ClientInterceptor] = secret.map {
        [InternalCredentialClientInterceptor(credential: InternalCredential(secret: $0), caller: caller)]
    } ?? []
    return try RPCChannel(
        configuration: RPCChannelConfiguration(host: "127.0.0.1", port: host.port), interceptors: interceptors,
        logger: testLogger)
}

@Suite("Service host")
struct ServiceHostTests {
    let definition = ServiceDefinition(name: "echo", descriptorSets: [GRPCInteropTestingDescriptorSet.base64]) { _ in
        [IdentityEchoService()]
    }

    @Test("a call without the internal credential is refused; health stays open")
    func unsignedCallsAreRefused() async throws {
        let host = try await startHost(definition)
        let rpc = try channel(to: host, signedWith: nil)
        let client = Grpc_Testing_TestService.Client(transport: rpc)
        let error = await #expect(throws: RPCError.self) { try await client.emptyCall(Grpc_Testing_Empty()) }
        #expect(error?.code == .unauthenticated)
        #expect(error?.errorReason == "INTERNAL_CREDENTIAL_MISSING")

        let health = Grpc_Health_V1_Health.Client(transport: rpc)
        #expect(try await health.check(Grpc_Health_V1_HealthCheckRequest()).status == .serving)
        await rpc.close()
        await host.shutdown()
    }

    @Test("a signed call reaches the handler with the caller, user, session and client address")
    func signedCallCarriesIdentity() async throws {
        let host = try await startHost(definition)
        let rpc = try channel(to: host, signedWith: "kit-secret")
        let client = Grpc_Testing_TestService.Client(transport: rpc)
        let user = UUID()
        let response = try await client.unaryCall(
            Grpc_Testing_SimpleRequest(),
            options: .onBehalf(of: user, sessionID: "session-1", clientAddress: "203.0.113.9"))
        #expect(response.username == "gateway|\(user.uuidString.lowercased())|session-1|203.0.113.9")

        // No user: the handler's requireUser() answers UNAUTHENTICATED.
        let error = await #expect(throws: RPCError.self) { try await client.unaryCall(Grpc_Testing_SimpleRequest()) }
        #expect(error?.errorReason == "USER_REQUIRED")
        await rpc.close()
        await host.shutdown()
    }

    @Test("a credential made with another secret, for another method or too long ago is refused")
    func forgedCredentialsAreRefused() async throws {
        let host = try await startHost(definition)
        let wrongSecret = try channel(to: host, signedWith: "not-the-secret")
        let error = await #expect(throws: RPCError.self) {
            try await Grpc_Testing_TestService.Client(transport: wrongSecret).unaryCall(
                Grpc_Testing_SimpleRequest(), options: .onBehalf(of: UUID()))
        }
        #expect(error?.code == .unauthenticated)
        #expect(error?.errorReason == "INTERNAL_CREDENTIAL_INVALID")
        await wrongSecret.close()

        let credential = InternalCredential(secret: "kit-secret")
        let unary = MethodDescriptor(service: "grpc.testing.TestService", method: "UnaryCall")
        let empty = MethodDescriptor(service: "grpc.testing.TestService", method: "EmptyCall")
        let identity = CallerIdentity(caller: "gateway", userID: UUID())
        let signed = credential.metadata(for: identity, method: unary)
        #expect(try credential.verify(signed, method: unary) == identity)
        #expect(throws: RPCError.self) { try credential.verify(signed, method: empty) }
        let stale = credential.metadata(for: identity, method: unary, now: Date().addingTimeInterval(-600))
        #expect(throws: RPCError.self) { try credential.verify(stale, method: unary) }
        var otherUser = signed
        otherUser.set(InternalCredential.Key.userID, UUID().uuidString.lowercased())
        #expect(throws: RPCError.self) { try credential.verify(otherUser, method: unary) }
        await host.shutdown()
    }

    @Test("an unexpected error reaches the client as INTERNAL with a correlation id, never its text")
    func unexpectedErrorsAreInternal() async throws {
        let host = try await startHost(definition)
        let rpc = try channel(to: host, signedWith: "kit-secret")
        var request = Grpc_Testing_SimpleRequest()
        request.responseStatus.code = 13
        let error = await #expect(throws: RPCError.self) {
            try await Grpc_Testing_TestService.Client(transport: rpc).unaryCall(request, options: .onBehalf(of: UUID()))
        }
        #expect(error?.code == .internal)
        #expect(error?.message.contains("correlation id") == true)
        #expect(error?.message.contains("SELECT") == false)
        await rpc.close()
        await host.shutdown()
    }

    @Test("metrics count calls by method and code at GET /metrics")
    func metricsEndpoint() async throws {
        let host = try await startHost(definition, metrics: true)
        let rpc = try channel(to: host, signedWith: "kit-secret")
        let client = Grpc_Testing_TestService.Client(transport: rpc)
        for _ in 0..<3 { _ = try await client.emptyCall(Grpc_Testing_Empty()) }
        let metricsPort = try #require(host.metricsPort)
        let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(metricsPort)/metrics")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let text = String(decoding: body, as: UTF8.self)
        #expect(text.contains(#"habitflow_rpc_server_handled_total{service="grpc.testing.TestService",method="EmptyCall",code="OK"} 3"#))
        #expect(text.contains("habitflow_rpc_server_handling_seconds_bucket"))
        await rpc.close()
        await host.shutdown()
    }

    @Test("configuration from the environment: defaults of the local stack, overrides, and clear errors")
    func configurationFromEnvironment() throws {
        let defaults = try ServiceConfiguration.fromEnvironment(service: "habits", environment: [:])
        #expect(defaults.port == 7072)
        #expect(defaults.metricsPort == 9072)
        #expect(defaults.databaseURL == "postgresql://habits:habits-local@127.0.0.1:7432/habitflow")
        #expect(defaults.addresses(of: "auth") == [.init(host: "127.0.0.1", port: 7071)])

        let configured = try ServiceConfiguration.fromEnvironment(
            service: "habits",
            environment: [
                "HABITFLOW_HABITS_PORT": "8000", "HABITFLOW_AUTH_ADDRESSES": "10.0.0.1:7071, [::1]:7171",
                "HABITFLOW_INTERNAL_SECRET": "s3cret", "HABITFLOW_LOG_LEVEL": "debug",
            ])
        #expect(configured.port == 8000)
        #expect(configured.internalSecret == "s3cret")
        #expect(configured.logLevel == .debug)
        #expect(configured.addresses(of: "auth") == [.init(host: "10.0.0.1", port: 7071), .init(host: "::1", port: 7171)])
        #expect(try ServiceConfiguration.fromEnvironment(service: "gateway", environment: [:]).databaseURL == nil)

        #expect(throws: ConfigurationError.self) {
            try ServiceConfiguration.fromEnvironment(service: "habits", environment: ["HABITFLOW_HABITS_PORT": "70000"])
        }
        #expect(throws: ConfigurationError.self) {
            try ServiceConfiguration.fromEnvironment(service: "habits", environment: ["HABITFLOW_AUTH_ADDRESSES": "nohost"])
        }
    }
}

/// Two hosts with databases: the publisher's outbox relay delivers through a channel the kit signs, to the
/// subscriber's EventSubscriberService behind the credential check. One test at a time: both publish through the
/// habits outbox, and a relay of one would deliver the other's events.
@Suite("Service host with Postgres", .serialized)
struct ServiceHostDatabaseTests {
    /// A host (as goals) whose EventSubscriberService records the aggregate id of every event delivered to it.
    static func startSubscriber(consumer: String) async throws -> (ServiceHost, Shared<[String]>) {
        let delivered = Shared<[String]>([])
        let subscriber = ServiceDefinition(name: "goals") { runtime in
            [EventSubscriberService(pool: runtime.pool, consumer: consumer) { envelope, _ in
                delivered.update { $0.append(envelope.aggregateID) }
            }]
        }
        return (try await startHost(subscriber, databaseURL: try TestEnvironment.serviceURL("goals")), delivered)
    }

    @Test("migrations run at start-up; the relay delivers to a subscribing service, past one that is down; /metrics")
    func outboxDeliveryBetweenHosts() async throws {
        let (subscriberHost, delivered) = try await Self.startSubscriber(consumer: "service-kit-test")
        // "absent" is a subscriber that is not running (nothing listens on port 1): it must delay only itself. The
        // habits schema: PostgresTests, which run at the same time, use social's outbox and goals' with relays of
        // their own, which would take this test's events.
        let publisher = ServiceDefinition(
            name: "habits", eventRoutes: ["habitflow.events.v1.UserDeleted": ["subscriber", "absent"]]
        ) { _ in [] }
        let publisherHost = try await startHost(
            publisher, databaseURL: try TestEnvironment.serviceURL("habits"), metrics: true,
            addresses: [
                "subscriber": [.init(host: "127.0.0.1", port: subscriberHost.port)],
                "absent": [.init(host: "127.0.0.1", port: 1)],
            ])

        let migrated = try await publisherHost.runtime.pool.queryRow(
            "SELECT count(*) FROM schema_migrations")?.decode(0, as: Int64.self)
        #expect((migrated ?? 0) >= 1)

        let user = UUID().uuidString.lowercased()
        var payload = Habitflow_Events_V1_UserDeleted()
        payload.userID = user
        try await publisherHost.runtime.pool.transaction { transaction in
            try await transaction.appendToOutbox(
                OutboxEvent(type: "habitflow.events.v1.UserDeleted", aggregateType: "user", aggregateID: user,
                            payload: try payload.serializedData()))
        }
        #expect(try await eventually { delivered.value.contains(user) })

        // Each subscriber's backlog and oldest undelivered age, as the relay last saw them.
        let metricsURL = URL(string: "http://127.0.0.1:\(try #require(publisherHost.metricsPort))/metrics")!
        @Sendable func gauge(_ name: String, _ subscriber: String) async throws -> Double? {
            let text = String(decoding: try await URLSession.shared.data(from: metricsURL).0, as: UTF8.self)
            let prefix = "\(name){subscriber=\"\(subscriber)\"} "
            let line = text.split(separator: "\n").first { $0.hasPrefix(prefix) }
            return line.flatMap { Double($0.dropFirst(prefix.count)) }
        }
        #expect(try await eventually { try await gauge("habitflow_outbox_backlog", "subscriber") == 0 })
        #expect(try await eventually { try await gauge("habitflow_outbox_backlog", "absent") ?? 0 >= 1 })
        #expect(
            try await eventually { try await gauge("habitflow_outbox_oldest_undelivered_seconds", "absent") ?? 0 > 0 })
        #expect(try await gauge("habitflow_outbox_oldest_undelivered_seconds", "subscriber") == 0)
        // What waits for "absent" is this test's alone: HabitsTests use the habits outbox later.
        try await publisherHost.runtime.pool.execute("DELETE FROM outbox WHERE aggregate_id = \(user)")
        await publisherHost.shutdown()
        await subscriberHost.shutdown()
    }

    @Test(
        "one LISTEN connection per process: the outbox relay and the change notices share it, each sees its channel",
        .timeLimit(.minutes(1)))
    func oneListeningConnection() async throws {
        let (subscriberHost, delivered) = try await Self.startSubscriber(consumer: "service-kit-listen-test")
        // Postgres wakes every listening connection for every NOTIFY in the database: the publisher must have one,
        // found by its application name.
        let applicationName = "listen-test-\(UUID().uuidString.prefix(8).lowercased())"
        let publisher = ServiceDefinition(
            name: "habits", eventRoutes: ["habitflow.events.v1.UserDeleted": ["subscriber"]]
        ) { runtime in [ChangeNoticesService(runtime: runtime)] }
        let publisherHost = try await startHost(
            publisher, databaseURL: try TestEnvironment.serviceURL("habits") + "?application_name=\(applicationName)",
            addresses: ["subscriber": [.init(host: "127.0.0.1", port: subscriberHost.port)]])
        let pool = publisherHost.runtime.pool

        // The change notices' stream opens (with all_users) once the shared connection listens.
        let rpc = try channel(to: publisherHost, signedWith: "kit-secret", caller: "gateway-watch")
        let notices = try await Habitflow_Events_V1_ChangeNotices.Client(transport: rpc)
            .watchChangedUsers(Habitflow_Events_V1_WatchChangedUsersRequest())
        var received = notices.makeAsyncIterator()
        #expect(try await received.next()?.allUsers == true)

        let listening = try await pool.queryRow(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = \(applicationName) AND query LIKE 'LISTEN%'")
        #expect(try listening?.decode(0, as: Int64.self) == 1)

        // A change notice (on the change channel) reaches the stream and only it; an outbox event (on the outbox
        // channel) reaches the relay, which delivers it.
        let changed = UUID().uuidString.lowercased()
        try await pool.execute("SELECT pg_notify('habitflow_changes_habits', \(changed))")
        // (Other suites' habits services may write meanwhile: their users come too.)
        var noticed = false
        while !noticed, let notice = try await received.next() { noticed = notice.userIds.contains(changed) }
        #expect(noticed)
        let deleted = UUID().uuidString.lowercased()
        var payload = Habitflow_Events_V1_UserDeleted()
        payload.userID = deleted
        try await pool.transaction { transaction in
            try await transaction.appendToOutbox(
                OutboxEvent(type: "habitflow.events.v1.UserDeleted", aggregateType: "user", aggregateID: deleted,
                            payload: try payload.serializedData()))
        }
        // Within a second, long before the relay's own 10 s look: the notification woke it.
        #expect(try await eventually(timeout: .seconds(1)) { delivered.value.contains(deleted) })
        notices.cancel()
        await publisherHost.shutdown()
        await subscriberHost.shutdown()
    }
}
