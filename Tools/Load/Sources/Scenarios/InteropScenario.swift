internal import Foundation
internal import GRPCInteropTesting
public import HabitFlowRPC
public import HabitFlowRPCClient

/// grpc's interop `grpc.testing.TestService` (our `interop-server`): proves the driver on real RPC without the
/// HabitFlow services. Users hold nothing.
public struct InteropScenario: LoadScenario {
    public struct User: Sendable {}

    enum Operation: String, CaseIterable {
        case unaryCall = "unary-call"
        case emptyCall = "empty-call"
    }

    public let connector: RPCConnector
    public let callOptions: CallOptions
    /// Size of the payload asked for in each UnaryCall response (and sent in each request).
    public let payloadSize: Int

    public init(connector: RPCConnector, callTimeout: Duration, payloadSize: Int = 16) {
        self.connector = connector
        self.callOptions = CallOptions(timeout: callTimeout)
        self.payloadSize = payloadSize
    }

    public var name: String { "interop" }
    public var operationNames: [String] { Operation.allCases.map(\.rawValue) }
    public static let standardMix = OperationMix.fixed(["unary-call": 3, "empty-call": 1])
    public var defaultMix: OperationMix { Self.standardMix }

    public func openConnection(index: Int) async throws -> RPCChannel { try await connector.open() }
    public func closeConnection(_ connection: RPCChannel) async { await connection.close() }
    public func prepareUser(index: Int, connection: RPCChannel) async throws -> User { User() }

    public func perform(operation: Int, user: inout User, connection: RPCChannel) async throws {
        let client = Grpc_Testing_TestService.Client(transport: connection)
        switch Operation.allCases[operation] {
        case .unaryCall:
            let response = try await client.unaryCall(
                .with {
                    $0.responseSize = Int32(payloadSize)
                    $0.payload = .with { $0.body = Data(count: payloadSize) }
                }, options: callOptions)
            guard response.payload.body.count == payloadSize else {
                throw ResponseCheckFailure("UnaryCall returned \(response.payload.body.count) bytes, not \(payloadSize)")
            }
        case .emptyCall:
            _ = try await client.emptyCall(Grpc_Testing_Empty(), options: callOptions)
        }
    }
}
