// Gateway overhead (Benchmarks/gateway.sh): the same habits RPC (HabitsService/GetHabit) called directly on the habits
// service, signed with the internal credential as the gateway signs it, and through the gateway with an access
// token, at a fixed concurrency; optionally also through a plain HTTP/2 reverse proxy in front of habits (nghttpx,
// signed like the direct calls): what one proxy hop costs on this machine when it does nothing else. Paths take
// turns within each round; each round's p50s are compared with that round's direct p50, and the goal's figure is
// the median of those per-round differences. Figures, not a test.
//
// gateway-benchmark --gateway HOST:PORT --habits HOST:PORT --secret SECRET [--proxy HOST:PORT] [--concurrency 32]
//                   [--seconds 10] [--rounds 3] [--gateway-pid PID] [--habits-pid PID] [--proxy-pid PID]
//                   (with pids: each process's CPU time per call, from /proc)
import HabitFlowInternalCredential
import Foundation
import HabitFlowBenchmarkSupport
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowSDK
import Logging
import Synchronization

struct Options {
    var gateway = ""
    var habits = ""
    var secret = ""
    var concurrency = 32
    var seconds = 10
    var rounds = 3
    var proxy: String?
    var gatewayPID: Int?
    var habitsPID: Int?
    var proxyPID: Int?

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
            case "--proxy": proxy = value
            case "--proxy-pid": proxyPID = Int(value)
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

struct Mode: Sendable {
    var name: String
    var call: @Sendable () async throws -> Void
}

let proxyChannel = try options.proxy.map { address in
    try RPCChannel(
        configuration: RPCChannelConfiguration(targets: [target(address)]),
        interceptors: [InternalCredentialClientInterceptor(credential: InternalCredential(secret: options.secret), caller: "gateway")],
        logger: quiet)
}
var modes = [
    Mode(name: "direct") { _ = try await directClient.getHabit(request, options: directOptions) },
    Mode(name: "gateway") { _ = try await gatewayClient.getHabit(request, options: finalGatewayOptions) },
]
if let proxyChannel {
    let proxyClient = Habitflow_Habits_V1_HabitsService.Client(transport: proxyChannel)
    modes.append(Mode(name: "nghttpx") { _ = try await proxyClient.getHabit(request, options: directOptions) })
}
// Warm-up: connections, caches (the gateway's session check, the pools), JIT-free but page-cache-warm.
for mode in modes { _ = try await measure(concurrency: options.concurrency, seconds: 2, into: Samples(), mode.call) }

/// CPU seconds so far of the gateway, habits, the proxy (each `nil` without its pid) and this client.
func cpuOfEveryProcess() -> (Double?, Double?, Double?, Double) {
    (
        cpuSeconds(options.gatewayPID), cpuSeconds(options.habitsPID), cpuSeconds(options.proxyPID),
        ProcessCPU.seconds(getpid())
    )
}

/// What one path did in one round.
struct RoundFigures {
    var calls = 0
    var p50 = Double.nan
    /// CPU seconds of the gateway, habits, the proxy and this client during the round.
    var cpu = (gateway: 0.0, habits: 0.0, proxy: 0.0, client: 0.0)
}

let pooled = Dictionary(uniqueKeysWithValues: modes.map { ($0.name, Samples()) })
var measuredRounds: [[String: RoundFigures]] = []
for round in 0..<options.rounds {
    // The order rotates each round, so drift on a shared machine hits every path alike.
    let order = Array(modes[(round % modes.count)...] + modes[..<(round % modes.count)])
    var figures: [String: RoundFigures] = [:]
    for mode in order {
        let samples = Samples()
        let before = cpuOfEveryProcess()
        let calls = try await measure(
            concurrency: options.concurrency, seconds: options.seconds, into: samples, mode.call)
        let after = cpuOfEveryProcess()
        let sorted = samples.sorted
        pooled[mode.name]!.add(sorted)
        figures[mode.name] = RoundFigures(
            calls: calls, p50: percentile(sorted, 0.50),
            cpu: (
                (after.0 ?? 0) - (before.0 ?? 0), (after.1 ?? 0) - (before.1 ?? 0), (after.2 ?? 0) - (before.2 ?? 0),
                after.3 - before.3))
    }
    measuredRounds.append(figures)
}
let rounds = measuredRounds
await direct.close()
await viaGateway.close()
await proxyChannel?.close()

/// The median (nearest rank: the lower middle value for an even count).
func median(_ values: [Double]) -> Double {
    percentile(values.sorted(), 0.50)
}

/// One path's calls and the CPU seconds of the gateway, habits, the proxy and this client, over all rounds.
func totals(_ name: String, in rounds: [[String: RoundFigures]]) -> (
    calls: Int, cpu: (gateway: Double, habits: Double, proxy: Double, client: Double)
) {
    var sum = (calls: 0, cpu: (gateway: 0.0, habits: 0.0, proxy: 0.0, client: 0.0))
    for figures in rounds.compactMap({ $0[name] }) {
        sum.calls += figures.calls
        sum.cpu = (
            sum.cpu.gateway + figures.cpu.gateway, sum.cpu.habits + figures.cpu.habits,
            sum.cpu.proxy + figures.cpu.proxy, sum.cpu.client + figures.cpu.client
        )
    }
    return sum
}

print("HabitsService/GetHabit, concurrency \(options.concurrency), \(options.rounds) × \(options.seconds) s per path")
print("path      calls/s     p50 (µs)   p99 (µs)   (all rounds' calls together)")
var pooledP50: [String: Double] = [:]
var pooledP99: [String: Double] = [:]
for mode in modes {
    let sorted = pooled[mode.name]!.sorted
    let calls = totals(mode.name, in: rounds).calls
    pooledP50[mode.name] = percentile(sorted, 0.50)
    pooledP99[mode.name] = percentile(sorted, 0.99)
    print(
        mode.name.padding(toLength: 8, withPad: " ", startingAt: 0)
            + String(
                format: "%9.0f  %11.0f  %9.0f", Double(calls) / Double(options.rounds * options.seconds),
                pooledP50[mode.name]!, pooledP99[mode.name]!))
}
print(
    String(
        format: "gateway / direct: p50 × %.2f, p99 × %.2f", pooledP50["gateway"]! / pooledP50["direct"]!,
        pooledP99["gateway"]! / pooledP99["direct"]!))

/// What a path adds to direct's p50, round by round.
func addedPerRound(_ name: String, in rounds: [[String: RoundFigures]]) -> [Double] {
    rounds.map { ($0[name]?.p50 ?? .nan) - ($0["direct"]?.p50 ?? .nan) }
}
for mode in modes where mode.name != "direct" {
    let added = addedPerRound(mode.name, in: rounds)
    print(
        String(format: "%@ adds at p50: median %.0f µs over the rounds (", mode.name, median(added))
            + added.map { String(format: "%.0f", $0) }.joined(separator: ", ") + ")")
}
let addedP50 = median(addedPerRound("gateway", in: rounds))
print("goal (the gateway adds < 1000 µs at p50, median of the rounds): \(addedP50 < 1000 ? "met" : "NOT met")")
if options.gatewayPID != nil || options.habitsPID != nil || options.proxyPID != nil {
    for mode in modes {
        let (count, spent) = totals(mode.name, in: rounds)
        let calls = Double(max(count, 1))
        let proxy = options.proxyPID == nil ? "" : String(format: ", nghttpx %.0f µs", spent.proxy / calls * 1e6)
        print(
            String(
                format: "CPU per call, %@: gateway %.0f µs, habits %.0f µs", mode.name, spent.gateway / calls * 1e6,
                spent.habits / calls * 1e6) + proxy + String(format: ", this client %.0f µs", spent.client / calls * 1e6))
    }
}
