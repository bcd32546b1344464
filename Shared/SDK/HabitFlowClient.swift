public import Foundation
public import HabitFlowAuthProtos
public import HabitFlowGatewayProtos
public import HabitFlowGoalsProtos
public import HabitFlowHabitsProtos
public import HabitFlowSocialProtos
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import HabitFlowTLS
public import Logging

/// HabitFlow for an app: one object that talks to the gateway, keeps the session's tokens and renews them.
///
/// ```swift
/// let client = try HabitFlowClient(configuration: .init(host: "api.habitflow.example", port: 443, useTLS: true))
/// try await client.logIn(email: "ana@example.com", password: password)
/// let habit = try await client.habits.createHabit(.with { $0.name = "Read"; $0.weeklyTarget = 5 })
/// _ = try await client.habits.markHabitDone(.with { $0.habitID = habit.id })
/// let goal = try await client.goals.createGoal(.with {
///     $0.title = "Read 5 times a week"; $0.type = .weeklyHabit; $0.target.value = 5; $0.horizon = .twelveWeeks
///     $0.habitIds = [habit.id]
/// })
/// _ = try await client.social.sendFriendRequest(.with { $0.username = "ben" })
/// let dashboard = try await client.dashboard()
/// print(dashboard.weeklyScore.display)   // "100% (1/1 habits)"
/// print(dashboard.goals[0].display)      // "1/5"
/// print(dashboard.leaderboard.me.rank)   // 1
/// ```
///
/// ``auth``, ``habits``, ``goals``, ``social`` and ``gateway`` offer every public RPC, typed (their messages are the API's data model).
/// Each call gets the configured deadline unless it passes its own; reads and idempotent writes are retried when
/// the service is briefly unavailable; an expired access token is refreshed automatically, once for all the calls
/// that need it. Errors are ``HabitFlowError``s: a kind to switch on, the status, field violations, a retry delay.
public final class HabitFlowClient: Sendable {
    public struct Configuration: Sendable {
        /// The gateway's address.
        public var host: String
        public var port: Int
        /// TLS with ALPN h2, verifying the gateway's certificate against the system's roots or
        /// ``trustedCertificatesFile``.
        public var useTLS: Bool
        /// PEM file of the certificates that may sign the gateway's certificate (a private CA); `nil`: the system's.
        public var trustedCertificatesFile: String?
        /// The deadline of a call that passes none.
        public var timeout: Duration = .seconds(10)
        /// How many times a read or idempotent write is attempted when the service is unavailable (1: no retries).
        public var maximumAttempts = 3
        /// The access token is renewed this long before it expires (clocks differ; a call takes time).
        public var refreshMargin: Duration = .seconds(60)
        /// Sent with sign-up and log-in, so each device has one session (see ListSessions).
        public var deviceID: String?
        public var deviceName: String?

        public init(host: String = "127.0.0.1", port: Int = 7070, useTLS: Bool = false) {
            self.host = host
            self.port = port
            self.useTLS = useTLS
        }
    }

    /// Accounts, sessions, profile, passwords (habitflow.auth.v1.AuthService).
    public let auth: Habitflow_Auth_V1_AuthService.Client
    /// Categories, habits, check-ins, weeks and scores (habitflow.habits.v1.HabitsService).
    public let habits: Habitflow_Habits_V1_HabitsService.Client
    /// Goals, their links to habits, assessments, progress and history (habitflow.goals.v1.GoalsService).
    public let goals: Habitflow_Goals_V1_GoalsService.Client
    /// Friends, requests, blocks, the partner, sharing settings and the weekly leaderboard
    /// (habitflow.social.v1.SocialService).
    public let social: Habitflow_Social_V1_SocialService.Client
    /// Views assembled by the gateway, such as the dashboard (habitflow.gateway.v1.GatewayService).
    public let gateway: Habitflow_Gateway_V1_GatewayService.Client

    private let configuration: Configuration
    private let channel: RPCChannel
    private let session: TokenSession

    /// - Parameter tokenStore: where the session's tokens live; pass a keychain-backed store to stay signed in
    ///   across launches.
    public init(
        configuration: Configuration, tokenStore: any TokenStore = InMemoryTokenStore(),
        logger: Logger = Logger(label: "habitflow-sdk", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws {
        var channelConfiguration = RPCChannelConfiguration(host: configuration.host, port: configuration.port)
        if configuration.useTLS {
            channelConfiguration.tls = .client(
                serverName: configuration.host,
                trustRoots: configuration.trustedCertificatesFile.map { .certificates(.file($0)) } ?? .systemDefault)
        }
        channelConfiguration.retry.maxAttempts = max(configuration.maximumAttempts, 1)
        // Connecting is also bounded by each call's deadline.
        channelConfiguration.connectTimeout = .seconds(10)
        let channel = try RPCChannel(configuration: channelConfiguration, logger: logger)
        let refresher = Habitflow_Auth_V1_AuthService.Client(transport: channel)
        let timeout = configuration.timeout
        let session = TokenSession(store: tokenStore, refreshMargin: configuration.refreshMargin) { refreshToken in
            do {
                return try await refresher.refresh(
                    .with { $0.refreshToken = refreshToken }, options: CallOptions(timeout: timeout)
                ).tokens
            } catch {
                throw HabitFlowError(error)
            }
        }
        let transport = SessionTransport(channel: channel, session: session, defaultTimeout: timeout)
        self.configuration = configuration
        self.channel = channel
        self.session = session
        self.auth = Habitflow_Auth_V1_AuthService.Client(transport: transport)
        self.habits = Habitflow_Habits_V1_HabitsService.Client(transport: transport)
        self.goals = Habitflow_Goals_V1_GoalsService.Client(transport: transport)
        self.social = Habitflow_Social_V1_SocialService.Client(transport: transport)
        self.gateway = Habitflow_Gateway_V1_GatewayService.Client(transport: transport)
    }

    // MARK: Session

    /// Creates an account and signs this device in.
    @discardableResult
    public func signUp(
        email: String, username: String, password: String, displayName: String = "",
        timeZone: String = TimeZone.current.identifier
    ) async throws -> Habitflow_Auth_V1_User {
        try await auth.register(
            .with {
                $0.email = email
                $0.username = username
                $0.password = password
                $0.displayName = displayName
                $0.timeZone = timeZone
                $0.device = device
            }
        ).user
    }

    /// Signs in with the account's email and password.
    @discardableResult
    public func logIn(email: String, password: String) async throws -> Habitflow_Auth_V1_User {
        try await logIn(password: password) { $0.email = email }
    }

    /// Signs in with the account's username and password.
    @discardableResult
    public func logIn(username: String, password: String) async throws -> Habitflow_Auth_V1_User {
        try await logIn(password: password) { $0.username = username }
    }

    private func logIn(
        password: String, identifier: (inout Habitflow_Auth_V1_LoginRequest) -> Void
    ) async throws -> Habitflow_Auth_V1_User {
        var request = Habitflow_Auth_V1_LoginRequest()
        identifier(&request)
        request.password = password
        request.device = device
        return try await auth.login(request).user
    }

    /// Ends this device's session. The tokens are forgotten even when the server cannot be told.
    public func logOut() async throws {
        do {
            _ = try await auth.logout(Habitflow_Auth_V1_LogoutRequest())
        } catch {
            await session.clear()
            throw error
        }
    }

    /// The signed-in user's id, or `nil` when signed out.
    public var signedInUserID: String? {
        get async { await session.current()?.userID }
    }

    /// The session's tokens (for an app that wants to show or move them), `nil` when signed out.
    public var tokens: StoredTokens? {
        get async { await session.current() }
    }

    // MARK: Shortcuts

    /// This week at a glance: weekly score, each habit's "X/Y", category scores, the goals being worked on with
    /// their progress, the top of the leaderboard; `missingParts` names what could not be fetched.
    public func dashboard() async throws -> Habitflow_Gateway_V1_Dashboard {
        try await gateway.getDashboard(Habitflow_Gateway_V1_GetDashboardRequest())
    }

    /// A finished data export.
    public struct ExportedArchive: Sendable, Hashable {
        /// Where the archive is.
        public var file: URL
        /// The name the server suggests for it, `habitflow-export-<username>-<date>.zip`.
        public var suggestedFileName: String
        public var byteCount: Int
    }

    /// Everything the account has in every service, as a ZIP of CSV files with a README.txt describing them, written
    /// to `file` (replaced if it exists). The archive streams into a temporary file beside `file` and is moved into
    /// place only once the server says it is complete, so a failed export never leaves a partial archive. One export
    /// per account per minute (``HabitFlowError/Kind/rateLimited`` with the delay otherwise).
    @discardableResult
    public func exportMyData(to file: URL, timeout: Duration = .seconds(600)) async throws -> ExportedArchive {
        let partial = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString).partial")
        guard FileManager.default.createFile(atPath: partial.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: partial.path])
        }
        defer { try? FileManager.default.removeItem(at: partial) }
        let output = try FileHandle(forWritingTo: partial)
        var suggestedFileName = ""
        var byteCount = 0
        do {
            defer { try? output.close() }
            let chunks = try await gateway.exportMyData(
                Habitflow_Gateway_V1_ExportMyDataRequest(), options: CallOptions(timeout: timeout))
            for try await chunk in chunks {
                if suggestedFileName.isEmpty { suggestedFileName = chunk.fileName }
                try output.write(contentsOf: chunk.data)
                byteCount += chunk.data.count
            }
        } catch let error as HabitFlowError {
            throw error
        } catch let error as RPCError {
            throw HabitFlowError(error)
        }
        if FileManager.default.fileExists(atPath: file.path) { try FileManager.default.removeItem(at: file) }
        try FileManager.default.moveItem(at: partial, to: file)
        return ExportedArchive(file: file, suggestedFileName: suggestedFileName, byteCount: byteCount)
    }

    /// The account's changes in habits, goals and social as they commit (habitflow.gateway.v1.GatewayService/
    /// WatchChanges): `changes` events, each a page of one service's ListChanges, and heartbeats, each message with
    /// the cursor after it. Keep the last cursor and pass it back after the stream ends (UNAVAILABLE when the gateway
    /// restarts, RESOURCE_EXHAUSTED when the app stopped reading): nothing is missed or repeated. An empty cursor
    /// starts with everything (a full sync), then goes live; a `caught_up` heartbeat marks the switch.
    ///
    /// - Parameter timeout: how long the stream may run (not the default call deadline: a watch is long-lived).
    public func watchChanges(from cursor: String = "", timeout: Duration = .seconds(24 * 3600)) async throws
        -> ChangeWatch
    {
        do {
            return ChangeWatch(
                responses: try await gateway.watchChanges(
                    .with { $0.cursor = cursor }, options: CallOptions(timeout: timeout)))
        } catch let error as RPCError {
            throw HabitFlowError(error)
        }
    }

    /// Closes the connection to the gateway; later calls fail.
    public func close() async {
        await channel.close()
    }

    private var device: Habitflow_Auth_V1_DeviceInfo {
        .with {
            $0.deviceID = configuration.deviceID ?? ""
            $0.deviceName = configuration.deviceName ?? ""
        }
    }
}

/// The messages of ``HabitFlowClient/watchChanges(from:timeout:)``, read as the app asks for them (nothing is
/// buffered ahead: a client that stops reading is eventually cut off by the gateway, and resumes from its cursor).
/// Errors are ``HabitFlowError``s.
public struct ChangeWatch: AsyncSequence, Sendable {
    public typealias Element = Habitflow_Gateway_V1_WatchChangesResponse

    let responses: ResponseStream<Element>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: ResponseStream<Element>.AsyncIterator

        public mutating func next() async throws -> Element? {
            do {
                return try await base.next()
            } catch let error as RPCError {
                throw HabitFlowError(error)
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: responses.makeAsyncIterator())
    }

    /// Ends the stream now; the sequence then ends with an error.
    public func cancel() { responses.cancel() }
}
