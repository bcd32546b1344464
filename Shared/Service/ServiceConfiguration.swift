internal import HabitFlowInternalCredential
public import Foundation
public import HabitFlowRPCClient
public import Logging

/// How one service process runs: where it listens, its database, where its migrations are, the internal
/// credential's secret and where the other services are. Executables read it from the environment
/// (``fromEnvironment(service:environment:)``); tests build it directly.
public struct ServiceConfiguration: Sendable {
    /// The service's name: its schema, its database role, its migrations folder and its log label (`"habits"`).
    public var name: String
    public var host: String
    /// 0 picks a free port (tests); ``ServiceHost/port`` tells which.
    public var port: Int
    /// Prometheus `/metrics` over HTTP/1.1; `nil` serves none (tests).
    public var metricsPort: Int?
    /// The service role's libpq URL; `nil` for a service without a schema (the gateway).
    public var databaseURL: String?
    public var databasePoolSize = 10
    /// The folder holding one migrations folder per service (`Schemas/sql`).
    public var sqlDirectory: String
    /// The shared secret of the internal credential every call between processes carries (DESIGN.md section 2).
    public var internalSecret: String
    /// Where the other services listen, by name; a missing name means its default local port.
    public var serviceAddresses: [String: [RPCChannelConfiguration.Target]] = [:]
    public var logLevel: Logger.Level = .info

    /// The local stack's ports (DESIGN.md section 5); metrics listen 2000 higher (gateway 9070 ... social 9074).
    public static let defaultPorts = ["gateway": 7070, "auth": 7071, "habits": 7072, "goals": 7073, "social": 7074]
    static let metricsPortOffset = 2000

    public init(
        service: String, host: String = "127.0.0.1", port: Int, databaseURL: String?, sqlDirectory: String,
        internalSecret: String
    ) {
        self.name = service
        self.host = host
        self.port = port
        self.databaseURL = databaseURL
        self.sqlDirectory = sqlDirectory
        self.internalSecret = internalSecret
    }

    /// The addresses of another service: configured replicas, or its default local port.
    public func addresses(of service: String) -> [RPCChannelConfiguration.Target] {
        if let configured = serviceAddresses[service], !configured.isEmpty { return configured }
        return [.init(host: "127.0.0.1", port: Self.defaultPorts[service] ?? 0)]
    }

    /// Reads `HABITFLOW_<SERVICE>_{HOST,PORT,METRICS_PORT,DATABASE_URL,DB_PASSWORD,DB_POOL_SIZE}`,
    /// `HABITFLOW_<OTHER>_ADDRESSES` (`host:port,host:port`, the replicas of another service), `HABITFLOW_SQL_DIR`,
    /// `HABITFLOW_INTERNAL_SECRET` and `HABITFLOW_LOG_LEVEL`. Defaults are the local stack's (scripts/stack).
    public static func fromEnvironment(
        service: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> ServiceConfiguration {
        let prefix = "HABITFLOW_\(service.uppercased())_"
        func value(_ name: String) -> String? {
            environment[name].flatMap { $0.isEmpty ? nil : $0 }
        }
        func port(_ name: String, default defaultValue: Int) throws(ConfigurationError) -> Int {
            guard let text = value(name) else { return defaultValue }
            guard let number = Int(text), (0...65535).contains(number) else {
                throw ConfigurationError(variable: name, problem: "expected a port number, got '\(text)'")
            }
            return number
        }

        let defaultPort = defaultPorts[service] ?? 0
        let servicePort = try port(prefix + "PORT", default: defaultPort)
        let databaseURL: String?
        if let url = value(prefix + "DATABASE_URL") {
            databaseURL = url
        } else if service == "gateway" {
            databaseURL = nil
        } else {
            let password = value(prefix + "DB_PASSWORD") ?? "\(service)-local"
            let postgresPort = value("HABITFLOW_POSTGRES_PORT") ?? "7432"
            databaseURL = "postgresql://\(service):\(password)@127.0.0.1:\(postgresPort)/habitflow"
        }
        var configuration = ServiceConfiguration(
            service: service, host: value(prefix + "HOST") ?? "127.0.0.1", port: servicePort,
            databaseURL: databaseURL,
            sqlDirectory: value("HABITFLOW_SQL_DIR") ?? locateSQLDirectory(),
            internalSecret: value("HABITFLOW_INTERNAL_SECRET") ?? InternalCredential.localDevelopmentSecret)
        configuration.metricsPort = try port(prefix + "METRICS_PORT", default: defaultPort + metricsPortOffset)
        if let poolSize = value(prefix + "DB_POOL_SIZE") {
            guard let size = Int(poolSize), size > 0 else {
                throw ConfigurationError(variable: prefix + "DB_POOL_SIZE", problem: "expected a positive integer")
            }
            configuration.databasePoolSize = size
        }
        if let level = value("HABITFLOW_LOG_LEVEL") {
            guard let parsed = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "HABITFLOW_LOG_LEVEL", problem: "unknown level '\(level)'")
            }
            configuration.logLevel = parsed
        }
        for other in defaultPorts.keys {
            let name = "HABITFLOW_\(other.uppercased())_ADDRESSES"
            guard let list = value(name) else { continue }
            configuration.serviceAddresses[other] = try parseTargets(list, variable: name)
        }
        return configuration
    }

    static func parseTargets(_ list: String, variable: String) throws(ConfigurationError) -> [RPCChannelConfiguration.Target] {
        var targets: [RPCChannelConfiguration.Target] = []
        for item in list.split(separator: ",") {
            let entry = item.trimmingCharacters(in: .whitespaces)
            guard let colon = entry.lastIndex(of: ":"), let port = Int(entry[entry.index(after: colon)...]),
                (1...65535).contains(port)
            else { throw ConfigurationError(variable: variable, problem: "expected host:port, got '\(entry)'") }
            var host = String(entry[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            targets.append(.init(host: host, port: port))
        }
        return targets
    }

    /// `Schemas/sql` in the working folder or above the executable (a build folder inside the repository), so a
    /// service started from a checkout finds its migrations without configuration.
    static func locateSQLDirectory() -> String {
        let fileManager = FileManager.default
        var candidates = [URL(fileURLWithPath: fileManager.currentDirectoryPath)]
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(folder)
            folder.deleteLastPathComponent()
        }
        for candidate in candidates {
            let sql = candidate.appendingPathComponent("Schemas/sql")
            if fileManager.fileExists(atPath: sql.path) { return sql.path }
        }
        return "Schemas/sql"
    }
}

/// A configuration variable with a value the service cannot use.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var variable: String
    public var problem: String
    public var description: String { "\(variable): \(problem)" }

    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }
}
