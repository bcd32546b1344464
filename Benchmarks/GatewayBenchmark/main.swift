// Gateway overhead (Benchmarks/gateway.sh): the same habits RPC (HabitsService/GetHabit) called directly on the habits
// service, signed with the internal credential as the gateway signs it, and through the gateway with an access
// token, at a fixed concurrency. Prints p50/p99 of each and what the gateway adds. Figures, not a test.
//
// gateway-benchmark --gateway HOST:PORT --habits HOST:PORT --secret SECRET [--concurrency 32] [--seconds 10] [--rounds 3]
//                   [--gateway-pid PID] [--habits-pid PID]   (with pids: each process's CPU time per call, from /proc)
import Foundation
import HabitFlowBenchmarkSupport
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowSDK
import HabitFlowServiceKit
import Logging
import Synchronization

struct Options {
    var gateway = ""
    var habits = ""
    var secret = ""
    var concurrency = 32
    var seconds = 10
    var rounds = 3
    var gatewayPID: Int?
    var habitsPID: Int?

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let flag = iterator.next() {
            guard let value = iterator.next() else { fatalError("\(flag) needs a value") }
            switch flag {
            case "--gateway": gateway = value
            case "--habits": habits = value
            case "--secret": secret = value
            case "--concurrency": concurrency = Int(value) ?? concurrency
            case "--seconds": seconds = Int(value) ?? seconds
            case "--rounds": rounds = Int(value) ?? rounds
            case "--gateway-pid": gatewayPID = Int(value)
            case "--habits-pid": habitsPID = Int(value)
            default: fatalError("unknown option \(flag)")
            }
        }
        precondition(!gateway.isEmpty && !habits.isEmpty && !secret.isEmpty, "--gateway, --habits and --secret are required")
    }
}

func target(_ address: String) -> RPCChannelConfiguration.Target {
    guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else {
        fatalError("expected HOST:PORT, got \(address)")
    }
    return .init(host: String(address[..<colon]), port: port)
}

/// Latencies in microseconds, from every worker.
final class Samples: Sendable {
    private let values = Mutex<[Double]>([])
    func add(_ batch: [Double]) { values.withLock { $0.append(contentsOf: batch) } }
    var sorted: [Double] { values.withLock { $0.sorted() } }
}

func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    nearestRank(sorted, fraction) ?? .nan
}

/// CPU seconds of a process so far; `nil` without a pid.
func cpuSeconds(_ pid: Int?) -> Double? {
    pid.map { ProcessCPU.seconds(Int32($0)) }
}

func microseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

/// `concurrency` workers calling `call` back to back for `seconds`; returns how many calls completed.
func measure(
    concurrency: Int, seconds: Int, into samples: Samples, _ call: @escaping @Sendable () async throws -> Void
) async throws -> Int {
    let end = ContinuousClock.now + .seconds(seconds)
    return try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                var batch: [Double] = []
                while ContinuousClock.now < end {
                    let start = ContinuousClock.now
                    try await call()
                    batch.append(microseconds(ContinuousClock.now - start))
                }
                samples.add(batch)
                return batch.count
            }
        }
        return try await group.reduce(0, +)
    }
}

let options = Options(CommandLine.arguments)
let quiet = Logger(label: "gateway-benchmark", factory: { _ in SwiftLogNoOpLogHandler() })

// A fresh user with one habit, made through the gateway with the SDK.
let gatewayTarget = target(options.gateway)
let sdk = try HabitFlowClient(configuration: .init(host: gatewayTarget.host, port: gatewayTarget.port))
let suffix = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
let user = try await sdk.signUp(
    email: "bench-\(suffix)@example.com", username: "bench_\(suffix)", password: "benchmark password \(suffix)")
let habit = try await sdk.habits.createHabit(.with { $0.name = "Benchmark" })
_ = try await sdk.habits.markHabitDone(.with { $0.habitID = habit.id })
guard let tokens = await sdk.tokens, let userID = UUID(uuidString: user.id) else { fatalError("no session") }
await sdk.close()
let request = Habitflow_Habits_V1_GetHabitRequest.with { $0.habitID = habit.id }

// Direct: a channel to habits that signs like the gateway. Through the gateway: a plain channel with the token.
let direct = try RPCChannel(
    configuration: RPCChannelConfiguration(targets: [target(options.habits)]),
    interceptors: [InternalCredentialClientInterceptor(credential: InternalCredential(secret: options.secret), caller: "gateway")],
    logger: quiet)
let viaGateway = try RPCChannel(configuration: RPCChannelConfiguration(targets: [gatewayTarget]), logger: quiet)
let directClient = Habitflow_Habits_V1_HabitsService.Client(transport: direct)
let gatewayClient = Habitflow_Habits_V1_HabitsService.Client(transport: viaGateway)
let directOptions = CallOptions.onBehalf(of: userID, sessionID: tokens.sessionID, clientAddress: "127.0.0.1", timeout: .seconds(5))
var gatewayOptions = CallOptions(timeout: .seconds(5))
gatewayOptions.metadata.add("authorization", "Bearer \(tokens.accessToken)")
let finalGatewayOptions = gatewayOptions

let modes: [(name: String, call: @Sendable () async throws -> Void)] = [
    ("direct", { _ = try await directClient.getHabit(request, options: directOptions) }),
    ("gateway", { _ = try await gatewayClient.getHabit(request, options: finalGatewayOptions) }),
]
// Warm-up: connections, caches (the gateway's session check, the pools), JIT-free but page-cache-warm.
for mode in modes { _ = try await measure(concurrency: options.concurrency, seconds: 2, into: Samples(), mode.call) }

var results: [String: Samples] = [:]
var counts: [String: Int] = [:]
var cpu: [String: (gateway: Double, habits: Double)] = [:]
for round in 0..<options.rounds {
    // Alternate the order each round so drift on a shared machine hits both alike.
    for mode in round.isMultiple(of: 2) ? modes : modes.reversed() {
        let samples = results[mode.name] ?? Samples()
        results[mode.name] = samples
        let before = (cpuSeconds(options.gatewayPID), cpuSeconds(options.habitsPID))
        counts[mode.name, default: 0] += try await measure(
            concurrency: options.concurrency, seconds: options.seconds, into: samples, mode.call)
        let after = (cpuSeconds(options.gatewayPID), cpuSeconds(options.habitsPID))
        var spent = cpu[mode.name] ?? (0, 0)
        spent.gateway += (after.0 ?? 0) - (before.0 ?? 0)
        spent.habits += (after.1 ?? 0) - (before.1 ?? 0)
        cpu[mode.name] = spent
    }
}
await direct.close()
await viaGateway.close()

struct Figures {
    var rate: Double
    var p50: Double
    var p99: Double
}

var figures: [Figures] = []
for mode in modes {
    let sorted = results[mode.name]?.sorted ?? []
    figures.append(
        Figures(
            rate: Double(counts[mode.name] ?? 0) / Double(options.rounds * options.seconds),
            p50: percentile(sorted, 0.50), p99: percentile(sorted, 0.99)))
}
print("HabitsService/GetHabit, concurrency \(options.concurrency), \(options.rounds) × \(options.seconds) s per path")
print("path      calls/s     p50 (µs)   p99 (µs)")
for (mode, figure) in zip(modes, figures) {
    print(
        mode.name.padding(toLength: 8, withPad: " ", startingAt: 0)
            + String(format: "%9.0f  %11.0f  %9.0f", figure.rate, figure.p50, figure.p99))
}
let (directFigures, gatewayFigures) = (figures[0], figures[1])
let addedP50 = gatewayFigures.p50 - directFigures.p50
print(
    String(
        format: "gateway / direct: p50 × %.2f, p99 × %.2f; the gateway adds %.0f µs at p50 and %.0f µs at p99",
        gatewayFigures.p50 / directFigures.p50, gatewayFigures.p99 / directFigures.p99, addedP50,
        gatewayFigures.p99 - directFigures.p99))
print("goal (adds < 1000 µs at p50): \(addedP50 < 1000 ? "met" : "NOT met")")
if options.gatewayPID != nil || options.habitsPID != nil {
    for mode in modes {
        let calls = Double(max(counts[mode.name] ?? 0, 1))
        let spent = cpu[mode.name] ?? (0, 0)
        print(
            String(
                format: "CPU per call, %@: gateway %.0f µs, habits %.0f µs", mode.name, spent.gateway / calls * 1e6,
                spent.habits / calls * 1e6))
    }
}
