public import Logging

/// What the command line passes to the scenarios.
public struct ScenarioSettings: Sendable {
    /// The gateway, or the interop server for the interop scenario.
    public var target: RPCTarget
    /// Auth and habits addresses for calls straight to the services (no gateway); both or neither.
    public var direct: (auth: RPCTarget, habits: RPCTarget)?
    /// The internal credential's secret, for direct calls.
    public var internalSecret: String
    public var connectTimeout: Duration
    /// Deadline of each call.
    public var callTimeout: Duration
    /// Accounts written by `habitflow-load seed`, resumed instead of signing up.
    public var accountsFile: String?
    /// Payload bytes of the interop UnaryCall.
    public var payloadSize: Int
    /// Where the HabitFlow scenarios record every call (see ``LoadLedger``); nil: nowhere.
    public var ledger: LoadLedger?
    public var logger: Logger

    public init(
        target: RPCTarget, direct: (auth: RPCTarget, habits: RPCTarget)? = nil, internalSecret: String = "",
        connectTimeout: Duration = .seconds(5), callTimeout: Duration = .seconds(10), accountsFile: String? = nil,
        payloadSize: Int = 16, ledger: LoadLedger? = nil, logger: Logger
    ) {
        self.ledger = ledger
        self.target = target
        self.direct = direct
        self.internalSecret = internalSecret
        self.connectTimeout = connectTimeout
        self.callTimeout = callTimeout
        self.accountsFile = accountsFile
        self.payloadSize = payloadSize
        self.logger = logger
    }

    var connector: RPCConnector { RPCConnector(target: target, connectTimeout: connectTimeout, logger: logger) }

    var route: HabitFlowRoute {
        if let direct { return .direct(auth: direct.auth, habits: direct.habits, internalSecret: internalSecret) }
        return .gateway(target)
    }

    var habitFlowConnector: HabitFlowConnector {
        HabitFlowConnector(route: route, connectTimeout: connectTimeout, logger: logger)
    }

    /// Where the calls go, for reports.
    public var targetDescription: String { route.description }
}

/// The scenarios the driver ships, by name.
public enum ScenarioCatalog {
    public struct Entry: Sendable {
        public var name: String
        public var summary: String
        public var operations: [String]
        public var defaultMix: OperationMix
        let make: @Sendable (ScenarioSettings) throws -> any LoadScenario
    }

    public static let entries: [Entry] = HabitFlowScenario.Kind.allCases.map { kind in
        Entry(
            name: kind.rawValue, summary: kind.summary,
            operations: HabitFlowScenario.Operation.allCases.map(\.rawValue), defaultMix: kind.mix(withDashboard: true),
            make: { settings in
                try HabitFlowScenario(
                    kind: kind, connector: settings.habitFlowConnector, callTimeout: settings.callTimeout,
                    accountsFile: settings.accountsFile, ledger: settings.ledger)
            })
    } + [
        Entry(
            name: "interop",
            summary: "grpc.testing.TestService (interop-server): UnaryCall and EmptyCall, no users to prepare",
            operations: InteropScenario.Operation.allCases.map(\.rawValue),
            defaultMix: InteropScenario.standardMix,
            make: { settings in
                InteropScenario(
                    connector: settings.connector, callTimeout: settings.callTimeout, payloadSize: settings.payloadSize)
            }),
    ]

    public static var names: [String] { entries.map(\.name) }

    public static func make(_ name: String, settings: ScenarioSettings) throws -> any LoadScenario {
        guard let entry = entries.first(where: { $0.name == name }) else {
            throw OptionError("unknown scenario '\(name)'; the scenarios are: \(names.joined(separator: ", "))")
        }
        return try entry.make(settings)
    }
}
