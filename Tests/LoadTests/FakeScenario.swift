import HabitFlowLoad
import HabitFlowLocking
import HabitFlowRPC

/// A scenario without a network: connections are numbers, and the operation does what the test says (sleep, fail,
/// stall), so the engine's pacing and bookkeeping can be checked exactly.
final class FakeScenario: LoadScenario, Sendable {
    typealias Connection = Int
    typealias User = Int

    struct State {
        var calls = 0
        var sendTimes: [ContinuousClock.Instant] = []
        var inFlightPerConnection: [Int: Int] = [:]
        var maxInFlightPerConnection: [Int: Int] = [:]
        var inFlight = 0
        var maxInFlight = 0
        var closedConnections = 0
        var finishedUsers: [Int] = []
    }

    /// What request number `call` (from 1) does.
    enum Behaviour: Sendable {
        case succeed(after: Duration)
        case fail(any Error)
    }

    let name = "fake"
    let operationNames = ["read", "write"]
    let defaultMix = OperationMix.fixed(["read": 1, "write": 1])
    let behaviour: @Sendable (Int) -> Behaviour
    let failingConnection: Int?
    let state = Locked(State())

    init(failingConnection: Int? = nil, behaviour: @escaping @Sendable (Int) -> Behaviour = { _ in .succeed(after: .zero) }) {
        self.failingConnection = failingConnection
        self.behaviour = behaviour
    }

    struct ConnectionRefused: Error {}

    func openConnection(index: Int) async throws -> Int {
        if index == failingConnection { throw ConnectionRefused() }
        return index
    }

    func closeConnection(_ connection: Int) async {
        state.withLock { $0.closedConnections += 1 }
    }

    func prepareUser(index: Int, connection: Int) async throws -> Int { index }

    func perform(operation: Int, user: inout Int, connection: Int) async throws {
        let call = state.withLock { state in
            state.calls += 1
            state.sendTimes.append(.now)
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            state.inFlightPerConnection[connection, default: 0] += 1
            state.maxInFlightPerConnection[connection] = max(
                state.maxInFlightPerConnection[connection] ?? 0, state.inFlightPerConnection[connection] ?? 0)
            return state.calls
        }
        defer {
            state.withLock { state in
                state.inFlight -= 1
                state.inFlightPerConnection[connection, default: 0] -= 1
            }
        }
        switch behaviour(call) {
        case .succeed(let delay):
            if delay > .zero { try await Task.sleep(for: delay) } else { await Task.yield() }
        case .fail(let error):
            throw error
        }
    }

    func finish(users: [Int]) async throws {
        state.withLock { $0.finishedUsers = users }
    }

    var snapshot: State { state.withLock { $0 } }
}

extension LoadPlan {
    static func test(
        _ pacing: Pacing = .closedLoop, users: Int = 1, connections: Int = 1, streams: Int = 100,
        duration: Duration? = nil, requests: Int? = nil, warmUp: Duration = .zero,
        mix: OperationMix = .fixed(["read": 1, "write": 1])
    ) -> LoadPlan {
        var plan = LoadPlan(mix: mix)
        plan.pacing = pacing
        plan.users = users
        plan.connections = connections
        plan.streamsPerConnection = streams
        plan.duration = duration
        plan.requests = requests
        plan.warmUp = warmUp
        return plan
    }
}
