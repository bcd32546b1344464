import HabitFlowInternalCredential
import Foundation
import HabitFlowAuthProtos
import HabitFlowCrypto
import HabitFlowEvents
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import HabitFlowTestSupport
import HabitFlowTokens
import Logging
import HabitFlowLocking
import Testing

@testable import HabitFlowAuth

/// Every suite that starts the auth service nests here and runs one test at a time: they share their database
/// (``AuthTestDatabase``), and some move their clock (a host with a clock a month ahead would send other tests' mail
/// and expire their sessions).
@Suite("Auth service (real RPC, real Postgres)", .serialized)
struct AuthServiceTests {}

let testLogger: Logger = {
    var logger = Logger(label: "auth-tests")
    logger.logLevel = .warning
    return logger
}()

/// A clock tests move by hand. Starts at the real time.
final class ManualClock: AuthClock {
    private let current: Locked<Date>
    init(_ start: Date = Date()) { current = Locked(start) }
    func now() -> Date { current.withLock { $0 } }
    func advance(by duration: Duration) { current.withLock { $0 = $0.addingTimeInterval(duration.timeInterval) } }
    func advance(seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// Auth's tests run in a database of their own (`habitflow_auth_tests`, made on first use in the test cluster, with
/// the auth schema owned by the auth role, as in Schemas/sql/roles.sql). Every auth host's outbox relay and mail
/// sender deliver whatever is due in its schema, whichever test wrote it: the gateway's, SDK's and load tests' stacks
/// route auth's events to habits and its mail to the log, these tests to a recorder and a fake mail server of their
/// own, and sharing one schema would let each take the other's.
actor AuthTestDatabase {
    static let shared = AuthTestDatabase()
    static let name = "habitflow_auth_tests"

    private var prepared: String?

    /// The auth role's URL for the tests' database, creating the database and schema the first time.
    func url() async throws -> String {
        if let prepared { return prepared }
        let superuser = try TestEnvironment.superuserURL()
        try await Self.withSuperuser(superuser) { connection in
            let exists = try await connection.queryRow(
                "SELECT 1 FROM pg_database WHERE datname = \(Self.name)") != nil
            // Simple query protocol: CREATE DATABASE cannot run as a prepared statement in a transaction.
            if !exists { try await connection.executeScript("CREATE DATABASE \(Self.name)") }
        }
        try await Self.withSuperuser(try Self.replacingDatabase(of: superuser)) { connection in
            try await connection.executeScript(
                """
                CREATE SCHEMA IF NOT EXISTS auth AUTHORIZATION auth;
                REVOKE ALL ON SCHEMA auth FROM PUBLIC;
                REVOKE ALL ON SCHEMA public FROM PUBLIC;
                GRANT CONNECT, TEMPORARY ON DATABASE \(Self.name) TO auth;
                """)
        }
        let url = try Self.replacingDatabase(of: try TestEnvironment.serviceURL("auth"))
        prepared = url
        return url
    }

    private static func withSuperuser(_ url: String, _ body: (PostgresConnection) async throws -> Void) async throws {
        var configuration = PostgresPool.Configuration(connectionString: url)
        configuration.maximumConnections = 1
        let pool = PostgresPool(configuration: configuration, logger: testLogger)
        do {
            try await pool.withConnection(body)
        } catch {
            await pool.shutdown()
            throw error
        }
        await pool.shutdown()
    }

    /// `url` with the tests' database in place of the one it names.
    static func replacingDatabase(of url: String) throws -> String {
        var components = try #require(URLComponents(string: url))
        components.path = "/\(name)"
        return try #require(components.string)
    }
}

/// The same on every test host: the signing keys table is shared, so every host must open every key.
let testKeyEncryptionKey = [UInt8](repeating: 7, count: 32)
let testInternalSecret = "auth-test-secret"

/// Settings for a test host: cheap bcrypt (cost 4), a manual clock, mail to the test's SMTP server, no clean-up.
func testSettings(clock: ManualClock, smtpPort: Int) -> AuthSettings {
    var settings = AuthSettings(keyEncryptionKey: testKeyEncryptionKey)
    settings.clock = clock
    settings.bcryptCost = 4
    settings.passwordHashingThreads = 2
    settings.smtp = SMTPConfiguration(host: "127.0.0.1", port: smtpPort)
    settings.mailPollInterval = .milliseconds(200)
    settings.maintenanceInterval = nil
    return settings
}

/// One running auth service with what it talks to: a fake SMTP server, an event subscriber recording what the
/// outbox relay delivers, and clients signed like the gateway's.
struct AuthTestEnvironment {
    let host: ServiceHost
    let clock: ManualClock
    let smtp: FakeSMTPServer
    let events: EventRecorder
    let channel: RPCChannel
    let auth: Habitflow_Auth_V1_AuthService.Client
    let authInternal: Habitflow_Auth_V1_AuthInternal.Client
    var settings: AuthSettings

    var pool: PostgresPool { host.runtime.pool }

    /// Starts everything, runs `body`, and stops everything (also when `body` throws).
    static func run(
        configure: (inout AuthSettings) -> Void = { _ in },
        _ body: (AuthTestEnvironment) async throws -> Void
    ) async throws {
        let clock = ManualClock()
        let smtp = try await FakeSMTPServer.start()
        let events = try await EventRecorder.start()
        var settings = testSettings(clock: clock, smtpPort: smtp.port)
        configure(&settings)
        var configuration = ServiceConfiguration(
            service: "auth", port: 0, databaseURL: try await AuthTestDatabase.shared.url(),
            sqlDirectory: TestEnvironment.sqlRoot, internalSecret: testInternalSecret)
        configuration.logLevel = .warning
        // Every service auth routes events to (`AuthServiceDefinition.eventRoutes`) is the recorder.
        for subscriber in Set(AuthServiceDefinition.eventRoutes.values.joined()) {
            configuration.serviceAddresses[subscriber] = [.init(host: "127.0.0.1", port: events.port)]
        }
        let host: ServiceHost
        do {
            host = try await ServiceHost.start(
                AuthServiceDefinition.make(settings: settings), configuration: configuration, logger: testLogger)
        } catch {
            await events.stop()
            await smtp.stop()
            throw error
        }
        let channel = try RPCChannel(
            configuration: RPCChannelConfiguration(host: "127.0.0.1", port: host.port),
            interceptors: [
                InternalCredentialClientInterceptor(
                    credential: InternalCredential(secret: testInternalSecret), caller: "gateway")
            ],
            logger: testLogger)
        let environment = AuthTestEnvironment(
            host: host, clock: clock, smtp: smtp, events: events, channel: channel,
            auth: .init(transport: channel), authInternal: .init(transport: channel), settings: settings)
        do {
            try await body(environment)
        } catch {
            await environment.stop()
            throw error
        }
        await environment.stop()
    }

    func stop() async {
        await channel.close()
        await host.shutdown()
        await events.stop()
        await smtp.stop()
    }

    // MARK: - Helpers

    /// Runs `body` with an `AuthInternal` client whose calls are signed as `caller` (``authInternal`` signs as the
    /// gateway, which forwards clients' calls), for example "gateway-export", as the gateway's export signs.
    func withInternalClient(
        signedAs caller: String, _ body: (Habitflow_Auth_V1_AuthInternal.Client) async throws -> Void
    ) async throws {
        let channel = try RPCChannel(
            configuration: RPCChannelConfiguration(host: "127.0.0.1", port: host.port),
            interceptors: [
                InternalCredentialClientInterceptor(
                    credential: InternalCredential(secret: testInternalSecret), caller: caller)
            ],
            logger: testLogger)
        do {
            try await body(Habitflow_Auth_V1_AuthInternal.Client(transport: channel))
        } catch {
            await channel.close()
            throw error
        }
        await channel.close()
    }

    /// A fresh account (random email and username), signed in.
    func register(
        password: String = "correct horse battery", timeZone: String = "Europe/Berlin", deviceID: UUID? = nil,
        deviceName: String = "test device", clientAddress: String = "203.0.113.10"
    ) async throws -> RegisteredUser {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        var request = Habitflow_Auth_V1_RegisterRequest()
        request.email = "user-\(suffix)@example.com"
        request.username = "user_\(suffix)"
        request.password = password
        request.timeZone = timeZone
        request.device.deviceName = deviceName
        if let deviceID { request.device.deviceID = deviceID.uuidString }
        let response = try await auth.register(request, options: .fromClient(clientAddress))
        return RegisteredUser(
            user: response.user, tokens: response.tokens, password: password, clientAddress: clientAddress)
    }

    /// Signs in with email and password.
    func login(
        email: String, password: String, deviceID: UUID? = nil, clientAddress: String = "203.0.113.10"
    ) async throws -> Habitflow_Auth_V1_LoginResponse {
        var request = Habitflow_Auth_V1_LoginRequest()
        request.email = email
        request.password = password
        request.device.deviceName = "test login"
        if let deviceID { request.device.deviceID = deviceID.uuidString }
        return try await auth.login(request, options: .fromClient(clientAddress))
    }

    func refresh(_ token: String) async throws -> Habitflow_Auth_V1_AuthTokens {
        var request = Habitflow_Auth_V1_RefreshRequest()
        request.refreshToken = token
        return try await auth.refresh(request).tokens
    }

    func sessionState(_ tokens: Habitflow_Auth_V1_AuthTokens, userID: String) async throws
        -> Habitflow_Auth_V1_SessionState
    {
        var request = Habitflow_Auth_V1_CheckSessionRequest()
        request.sessionID = tokens.sessionID
        request.userID = userID
        return try await authInternal.checkSession(request).state
    }

    /// The verifier the gateway would build from GetVerificationKeys.
    func accessTokenVerifier() async throws -> AccessTokenVerifier {
        let published = try await authInternal.getVerificationKeys(Habitflow_Auth_V1_GetVerificationKeysRequest())
        let keys = try published.keys.map { key in
            VerificationKey(
                keyID: key.keyID, publicKey: try Ed25519.PublicKey(rawRepresentation: Array(key.publicKey)),
                notAfter: key.hasNotAfter ? key.notAfter.date : nil)
        }
        return AccessTokenVerifier(issuer: published.issuer, audience: published.audience, keys: keys)
    }

    /// The token in the newest mail to `recipient` (waits for it to arrive).
    func mailedToken(to recipient: String, subjectContaining subject: String) async throws -> String {
        let arrived = try await eventually(timeout: .seconds(30)) { smtp.messages(to: recipient).contains { $0.contains(subject) } }
        try #require(arrived, "no mail with \"\(subject)\" reached \(recipient)")
        let message = try #require(smtp.messages(to: recipient).last { $0.contains(subject) })
        let lines = message.components(separatedBy: "\r\n")
        let marker = try #require(lines.firstIndex { $0.hasPrefix("or enter this code") })
        return lines[marker + 1]
    }

    /// The `RPCError` a call throws (fails the test when it does not throw one).
    func error(_ call: () async throws -> some Any) async -> RPCError? {
        do {
            _ = try await call()
            Issue.record("expected the call to fail")
            return nil
        } catch let error as RPCError {
            return error
        } catch {
            Issue.record("expected an RPCError, got \(error)")
            return nil
        }
    }
}

/// An account a test registered, with what it needs to act as that user.
struct RegisteredUser {
    var user: Habitflow_Auth_V1_User
    var tokens: Habitflow_Auth_V1_AuthTokens
    var password: String
    var clientAddress: String

    var id: UUID { UUID(uuidString: user.id)! }

    /// Call options as the gateway sends them for this user's session.
    var options: CallOptions {
        .onBehalf(of: id, sessionID: tokens.sessionID, clientAddress: clientAddress, timeout: .seconds(20))
    }
}

extension CallOptions {
    /// A call without a signed-in user, from a client at `address` (as the gateway reports it).
    static func fromClient(_ address: String) -> CallOptions {
        var options = CallOptions(timeout: .seconds(20))
        options.metadata.add(InternalCredential.Key.clientAddress, address)
        return options
    }
}
