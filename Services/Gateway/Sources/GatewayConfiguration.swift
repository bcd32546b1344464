public import Foundation
public import HabitFlowRPCWeb
public import HabitFlowServiceKit

/// Everything the gateway can be told (DESIGN.md sections 3 and 5), with defaults for the local stack.
///
/// The process part (address, metrics port, internal secret, where the services' replicas are, log level) is the
/// ``ServiceConfiguration`` every HabitFlow process reads; the rest is the gateway's own.
public struct GatewayConfiguration: Sendable {
    public var service: ServiceConfiguration

    /// TLS 1.3 with ALPN `h2` when set (`HABITFLOW_GATEWAY_TLS_CERT` and `HABITFLOW_GATEWAY_TLS_KEY`, PEM files);
    /// cleartext HTTP/2 (h2c) otherwise.
    public var tls: TLSFiles?

    /// The browser origins whose pages may call the gateway (CORS), from `HABITFLOW_CORS_ORIGINS` (comma-separated;
    /// `*` for any). `nil`: no CORS headers. gRPC-Web and Connect themselves are always served.
    public var cors: CORSPolicy?

    /// Calls per second (and burst) from one client address, counted before authentication.
    public var addressRateLimit = RateLimit(perSecond: 100, burst: 200)
    /// Calls per second (and burst) of one account, over all its devices.
    public var accountRateLimit = RateLimit(perSecond: 50, burst: 100)

    /// The deadline of a call that brings none.
    public var defaultTimeout: Duration = .seconds(30)
    /// The largest message accepted from a client and from a service, in bytes.
    public var maxMessageSize = 4 << 20
    /// How long connecting to a service may take before its calls fail `UNAVAILABLE`.
    public var connectTimeout: Duration = .seconds(1)
    /// How long a session's "still active" answer from auth is trusted: a revoked session or a deleted account is
    /// refused at most this long after the fact.
    public var sessionCheckInterval: Duration = .seconds(2)
    /// How long that answer is trusted instead while auth's session-end notices are live (auth then tells the
    /// gateway at once when a session ends); whenever they are not, `sessionCheckInterval` holds.
    public var pushedSessionCheckInterval: Duration = .seconds(300)
    /// While auth cannot be reached, a session last seen active is still accepted for this long (rather than every
    /// call failing); after it, calls fail `UNAVAILABLE`.
    public var sessionCheckGrace: Duration = .seconds(30)
    /// How far past its expiry (or before its issue time) an access token is still accepted, for clock skew.
    public var tokenLeeway: Duration = .seconds(30)
    /// The verification keys are fetched again this often (and at once when a token names an unknown key).
    public var keyRefreshInterval: Duration = .seconds(300)
    /// Each part of the dashboard is fetched under this deadline (or the call's, when shorter).
    public var dashboardPartTimeout: Duration = .seconds(2)
    /// An account may export its data once per this interval.
    public var exportInterval: Duration = .seconds(60)
    /// Each service's part of an export (all but the habits' entries) is fetched under this deadline.
    public var exportPartTimeout: Duration = .seconds(20)
    /// An export without a deadline of its own ends after this.
    public var exportStreamTimeout: Duration = .seconds(600)
    /// A `WatchChanges` stream that sent nothing for this long sends a heartbeat (so proxies keep it open).
    public var watchHeartbeatInterval: Duration = .seconds(15)
    /// A `WatchChanges` write that the client has not taken for this long (it stopped reading) ends the stream
    /// `RESOURCE_EXHAUSTED`: nothing is buffered for a slow client.
    public var watchSlowClientTimeout: Duration = .seconds(10)
    /// Open `WatchChanges` streams per account (devices and tabs) and on this gateway; more are `RESOURCE_EXHAUSTED`.
    public var watchersPerUser = 10
    public var maximumWatchers = 100_000

    public struct TLSFiles: Sendable, Hashable {
        public var certificatePath: String
        public var privateKeyPath: String

        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// A token bucket: `burst` calls at once, refilled at `perSecond`.
    public struct RateLimit: Sendable, Hashable {
        public var perSecond: Double
        public var burst: Double

        public init(perSecond: Double, burst: Double) {
            self.perSecond = perSecond
            self.burst = burst
        }
    }

    public init(service: ServiceConfiguration) {
        self.service = service
    }

    /// Reads the ``ServiceConfiguration`` of `gateway` plus:
    ///
    /// | variable | default |
    /// |---|---|
    /// | `HABITFLOW_GATEWAY_TLS_CERT`, `HABITFLOW_GATEWAY_TLS_KEY` | unset: h2c |
    /// | `HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT`, `HABITFLOW_GATEWAY_ADDRESS_RATE_BURST` | 100 per second, 200 |
    /// | `HABITFLOW_GATEWAY_ACCOUNT_RATE_LIMIT`, `HABITFLOW_GATEWAY_ACCOUNT_RATE_BURST` | 50 per second, 100 |
    /// | `HABITFLOW_GATEWAY_DEFAULT_TIMEOUT_MS` | 30000 |
    /// | `HABITFLOW_GATEWAY_MAX_MESSAGE_BYTES` | 4194304 |
    /// | `HABITFLOW_GATEWAY_CONNECT_TIMEOUT_MS` | 1000 |
    /// | `HABITFLOW_GATEWAY_SESSION_CHECK_MS`, `HABITFLOW_GATEWAY_SESSION_GRACE_MS` | 2000, 30000 |
    /// | `HABITFLOW_GATEWAY_TOKEN_LEEWAY_MS` | 30000 |
    /// | `HABITFLOW_GATEWAY_KEY_REFRESH_MS` | 300000 |
    /// | `HABITFLOW_GATEWAY_DASHBOARD_PART_TIMEOUT_MS` | 2000 |
    /// | `HABITFLOW_GATEWAY_EXPORT_INTERVAL_MS` | 60000 (one export per account per minute) |
    /// | `HABITFLOW_GATEWAY_WATCH_HEARTBEAT_MS` | 15000 |
    /// | `HABITFLOW_GATEWAY_WATCH_SLOW_CLIENT_MS` | 10000 |
    /// | `HABITFLOW_GATEWAY_WATCHERS_PER_USER`, `HABITFLOW_GATEWAY_MAX_WATCHERS` | 10, 100000 |
    /// | `HABITFLOW_CORS_ORIGINS` | unset: no CORS (comma-separated origins, `*` for any) |
    public static func fromEnvironment(
        _ service: ServiceConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> GatewayConfiguration {
        var configuration = GatewayConfiguration(service: service)
        let reader = EnvironmentReader(environment: environment, prefix: "HABITFLOW_GATEWAY_")
        switch (reader.string("TLS_CERT"), reader.string("TLS_KEY")) {
        case (nil, nil): break
        case (let certificate?, let key?):
            configuration.tls = TLSFiles(certificatePath: certificate, privateKeyPath: key)
        case (nil, _):
            throw ConfigurationError(variable: "HABITFLOW_GATEWAY_TLS_CERT", problem: "set it with HABITFLOW_GATEWAY_TLS_KEY")
        case (_, nil):
            throw ConfigurationError(variable: "HABITFLOW_GATEWAY_TLS_KEY", problem: "set it with HABITFLOW_GATEWAY_TLS_CERT")
        }
        configuration.addressRateLimit = RateLimit(
            perSecond: try reader.positiveNumber("ADDRESS_RATE_LIMIT") ?? configuration.addressRateLimit.perSecond,
            burst: try reader.positiveNumber("ADDRESS_RATE_BURST") ?? configuration.addressRateLimit.burst)
        configuration.accountRateLimit = RateLimit(
            perSecond: try reader.positiveNumber("ACCOUNT_RATE_LIMIT") ?? configuration.accountRateLimit.perSecond,
            burst: try reader.positiveNumber("ACCOUNT_RATE_BURST") ?? configuration.accountRateLimit.burst)
        if let value = try reader.milliseconds("DEFAULT_TIMEOUT_MS") { configuration.defaultTimeout = value }
        if let value = try reader.positiveNumber("MAX_MESSAGE_BYTES") { configuration.maxMessageSize = Int(value) }
        if let value = try reader.milliseconds("CONNECT_TIMEOUT_MS") { configuration.connectTimeout = value }
        if let value = try reader.milliseconds("SESSION_CHECK_MS") { configuration.sessionCheckInterval = value }
        if let value = try reader.milliseconds("SESSION_CHECK_PUSHED_MS") {
            configuration.pushedSessionCheckInterval = value
        }
        if let value = try reader.milliseconds("SESSION_GRACE_MS") { configuration.sessionCheckGrace = value }
        if let value = try reader.nonNegativeMilliseconds("TOKEN_LEEWAY_MS") { configuration.tokenLeeway = value }
        if let value = try reader.milliseconds("KEY_REFRESH_MS") { configuration.keyRefreshInterval = value }
        if let value = try reader.milliseconds("DASHBOARD_PART_TIMEOUT_MS") { configuration.dashboardPartTimeout = value }
        if let value = try reader.milliseconds("EXPORT_INTERVAL_MS") { configuration.exportInterval = value }
        if let value = try reader.milliseconds("WATCH_HEARTBEAT_MS") { configuration.watchHeartbeatInterval = value }
        if let value = try reader.milliseconds("WATCH_SLOW_CLIENT_MS") { configuration.watchSlowClientTimeout = value }
        if let value = try reader.positiveNumber("WATCHERS_PER_USER") { configuration.watchersPerUser = Int(value) }
        if let value = try reader.positiveNumber("MAX_WATCHERS") { configuration.maximumWatchers = Int(value) }
        if let origins = environment["HABITFLOW_CORS_ORIGINS"], !origins.isEmpty {
            guard let cors = CORSPolicy(parsing: origins) else {
                throw ConfigurationError(variable: "HABITFLOW_CORS_ORIGINS", problem: "expected origins separated by commas")
            }
            configuration.cors = cors
        }
        return configuration
    }
}

private struct EnvironmentReader {
    let environment: [String: String]
    let prefix: String

    func string(_ name: String) -> String? {
        environment[prefix + name].flatMap { $0.isEmpty ? nil : $0 }
    }

    func positiveNumber(_ name: String) throws(ConfigurationError) -> Double? {
        guard let text = string(name) else { return nil }
        guard let number = Double(text), number > 0, number.isFinite else {
            throw ConfigurationError(variable: prefix + name, problem: "expected a positive number, got '\(text)'")
        }
        return number
    }

    func milliseconds(_ name: String) throws(ConfigurationError) -> Duration? {
        try positiveNumber(name).map { .milliseconds($0) }
    }

    func nonNegativeMilliseconds(_ name: String) throws(ConfigurationError) -> Duration? {
        guard let text = string(name) else { return nil }
        guard let number = Double(text), number >= 0, number.isFinite else {
            throw ConfigurationError(variable: prefix + name, problem: "expected a number of milliseconds, got '\(text)'")
        }
        return .milliseconds(number)
    }
}
