/// What the command line passes to the scenarios.
public struct ScenarioSettings: Sendable {
    public var connector: RPCConnector
    /// Deadline of each call.
    public var callTimeout: Duration
    /// Accounts written by `habitflow-load seed`, reused instead of signing up.
    public var accountsFile: String?
    /// Payload bytes of the interop UnaryCall.
    public var payloadSize: Int

    public init(connector: RPCConnector, callTimeout: Duration, accountsFile: String? = nil, payloadSize: Int = 16) {
        self.connector = connector
        self.callTimeout = callTimeout
        self.accountsFile = accountsFile
        self.payloadSize = payloadSize
    }
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

    public static let entries: [Entry] = [
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
