public import HabitFlowRPC
public import HabitFlowRPCClient
public import Logging

/// Where the driver sends its calls: `host:port` (IPv6 as `[::1]:7070`); the port defaults to the gateway's 7070.
public struct RPCTarget: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public static let gatewayDefault = RPCTarget(host: "127.0.0.1", port: 7070)

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init(parsing text: String) throws(OptionError) {
        var host = Substring(text.trimmingWhitespace())
        var portText: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw OptionError("target '\(text)': missing ']'") }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw OptionError("target '\(text)' is not HOST:PORT") }
                portText = rest.dropFirst()
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard host.firstIndex(of: ":") == colon else {
                throw OptionError("target '\(text)': write an IPv6 address in brackets, like [::1]:7070")
            }
            portText = host[host.index(after: colon)...]
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw OptionError("target '\(text)' has no host") }
        var port = RPCTarget.gatewayDefault.port
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw OptionError("target '\(text)': port '\(portText)' is not a number from 1 to 65535")
            }
            port = number
        }
        self.init(host: String(host), port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The target could not be reached when the run started.
public struct TargetUnreachable: Error, CustomStringConvertible {
    public var target: RPCTarget
    public var reason: String

    public var description: String { "cannot connect to \(target): \(reason)" }
}

/// Opens the driver's connections: one `RPCChannel` with one HTTP/2 connection each, so the engine decides which
/// connection a request takes and how many streams it may have there.
public struct RPCConnector: Sendable {
    public var target: RPCTarget
    public var connectTimeout: Duration
    public var logger: Logger
    /// Run on every call (the internal credential's signer, for calls straight to a service).
    public var interceptors: [any ClientInterceptor]

    public init(
        target: RPCTarget, connectTimeout: Duration = .seconds(10), logger: Logger,
        interceptors: [any ClientInterceptor] = []
    ) {
        self.target = target
        self.connectTimeout = connectTimeout
        self.logger = logger
        self.interceptors = interceptors
    }

    public func open() async throws -> RPCChannel {
        var configuration = RPCChannelConfiguration(host: target.host, port: target.port)
        configuration.connectTimeout = connectTimeout
        // No retries, transparent ones included: the driver reports what the server answered.
        configuration.retry.maxAttempts = 1
        let channel = try RPCChannel(configuration: configuration, interceptors: interceptors, logger: logger)
        do {
            try await channel.connect()
        } catch {
            await channel.close()
            throw TargetUnreachable(target: target, reason: "\(error)")
        }
        return channel
    }
}
