import HabitFlowLoad
import HabitFlowLocking
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import SwiftProtobuf
import Testing

/// A service whose `Call` answers at once, except call number `stallingCall`, which takes a second.
struct StallService: RPCService {
    static let call = MethodDescriptor(service: "test.Stall", method: "Call")
    let stallingCall: Int
    let calls = SharedCalls()

    final class SharedCalls: Sendable {
        let count = Locked(0)
        func next() -> Int { count.withLock { $0 += 1; return $0 } }
    }

    var serviceName: String { "test.Stall" }
    var methods: [ServerMethod] {
        let calls = calls
        let stallingCall = stallingCall
        return [
            .unary(Self.call) { (_: Google_Protobuf_Empty, _) in
                if calls.next() == stallingCall { try await Task.sleep(for: .seconds(1)) }
                return Google_Protobuf_Empty()
            }
        ]
    }
}

/// Calls `test.Stall/Call` over one real connection.
struct StallScenario: LoadScenario {
    struct User: Sendable {}
    let connector: RPCConnector
    var name: String { "stall" }
    var operationNames: [String] { ["call"] }
    var defaultMix: OperationMix { .fixed(["call": 1]) }

    func openConnection(index: Int) async throws -> RPCChannel { try await connector.open() }
    func closeConnection(_ connection: RPCChannel) async { await connection.close() }
    func prepareUser(index: Int, connection: RPCChannel) async throws -> User { User() }
    func perform(operation: Int, user: inout User, connection: RPCChannel) async throws {
        let _: UnaryResponse<Google_Protobuf_Empty> = try await connection.unary(
            StallService.call, Google_Protobuf_Empty(), options: CallOptions(timeout: .seconds(5)))
    }
}

@Suite struct StallTests {
    @Test func aServerStallShowsInTheOpenLoopPercentiles() async throws {
        // 100 requests/s over one connection with one stream: the server holds call 50 for a second, so about
        // 100 requests meant for that second go late. Counted from their intended send times, they fill the tail.
        let (server, port) = try await startServer(services: [StallService(stallingCall: 50)])
        let connector = RPCConnector(target: RPCTarget(host: "127.0.0.1", port: port), logger: quietLogger)
        var plan = LoadPlan(mix: .fixed(["call": 1]))
        plan.pacing = .openLoop(ratePerSecond: 100)
        plan.users = 1
        plan.streamsPerConnection = 1
        plan.duration = .milliseconds(2500)
        let measurement = try await LoadEngine(scenario: StallScenario(connector: connector), plan: plan).run()
        await server.shutdown()

        let total = measurement.total
        #expect(total.failed == 0)
        #expect(total.latency.count == 250)
        #expect(total.latency.p90 >= .milliseconds(300), "corrected p90 \(total.latency.p90)")
        #expect(total.latency.p99 >= .milliseconds(800), "corrected p99 \(total.latency.p99)")
        #expect(total.serviceTime.p90 < .milliseconds(200), "service time p90 \(total.serviceTime.p90)")
        #expect(total.serviceTime.max >= .milliseconds(990))
    }
}
