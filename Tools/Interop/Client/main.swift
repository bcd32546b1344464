// interop-client: our RPC client driving a grpc.testing.TestService server; today the unary load generator of
// Benchmarks/client-unary.sh.
//
//   interop-client --port P [--host 127.0.0.1] [--concurrency 64] [--connections 1] [--duration 8] [--warm-up 2]
//                  [--response-size 16]
//
// Keeps `concurrency` UnaryCall requests in flight over `connections` HTTP/2 connections for `duration` seconds
// (after `warm-up` seconds not counted) and prints one JSON line: requests/s, p50/p99 latency in ms, errors.
import Foundation
import GRPCInteropTesting
import HabitFlowHTTP2
import HabitFlowRPC
import HabitFlowRPCClient
import Logging
import NIOPosix

struct Options {
    var host = "127.0.0.1"
    var port = 0
    var concurrency = 64
    var connections = 1
    var duration = 8.0
    var warmUp = 2.0
    var responseSize: Int32 = 16

    init(_ arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--host": host = value
            case "--port": port = try Self.number(value, flag)
            case "--concurrency": concurrency = try Self.number(value, flag)
            case "--connections": connections = try Self.number(value, flag)
            case "--duration": duration = Double(try Self.number(value, flag))
            case "--warm-up": warmUp = Double(try Self.number(value, flag))
            case "--response-size": responseSize = Int32(try Self.number(value, flag))
            default: throw UsageError("unknown option \(flag)")
            }
        }
        guard port > 0 else { throw UsageError("--port is required") }
    }

    private static func number(_ value: String, _ flag: String) throws(UsageError) -> Int {
        guard let number = Int(value), number >= 0 else { throw UsageError("\(flag) needs a number, got \(value)") }
        return number
    }
}

struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

let options: Options
do {
    options = try Options(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("interop-client: \(error)\n".utf8))
    exit(2)
}

var configuration = RPCChannelConfiguration(host: options.host, port: options.port)
configuration.connectionsPerTarget = options.connections
let channel = try RPCChannel(configuration: configuration, logger: Logger(label: "interop-client"))
try await channel.connect()
let client = Grpc_Testing_TestService.Client(transport: channel)
let request = Grpc_Testing_SimpleRequest.with { $0.responseSize = options.responseSize }

/// One worker's results: latencies (ns) of calls that finished inside the measured window, and errors.
struct WorkerResult: Sendable {
    var latencies: [Int64] = []
    var errors = 0
}

let eventLoopExecutors = MultiThreadedEventLoopGroup.singleton.makeIterator().map { EventLoopTaskExecutor(eventLoop: $0) }
let clock = ContinuousClock()
let measureStart = clock.now + .seconds(options.warmUp)
let measureEnd = measureStart + .seconds(options.duration)
let results = await withTaskGroup(of: WorkerResult.self) { group in
    for worker in 0..<options.concurrency {
        // Each worker runs on an event loop, where the channel places its calls on that loop's connections (as a
        // server handler calling another service does): no thread hop per call.
        let executor = eventLoopExecutors[worker % eventLoopExecutors.count]
        group.addTask(executorPreference: executor) {
            var result = WorkerResult()
            result.latencies.reserveCapacity(Int(options.duration) * 20_000 / max(options.concurrency / 8, 1))
            while true {
                let start = clock.now
                if start >= measureEnd { break }
                do {
                    _ = try await client.unaryCall(request)
                } catch {
                    if start >= measureStart { result.errors += 1 }
                    continue
                }
                if start >= measureStart {
                    let (seconds, attoseconds) = (clock.now - start).components
                    result.latencies.append(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
                }
            }
            return result
        }
    }
    var all: [WorkerResult] = []
    for await result in group { all.append(result) }
    return all
}
await channel.close()

let latencies = results.flatMap(\.latencies).sorted()
/// The latency at `fraction` of the sorted latencies, in ms.
func percentile(_ fraction: Double, of sorted: [Int64]) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return Double(sorted[min(Int(Double(sorted.count) * fraction), sorted.count - 1)]) / 1e6
}
let requestsPerSecond = Double(latencies.count) / options.duration
let errors = results.reduce(0) { $0 + $1.errors }
print(
    "{\"concurrency\": \(options.concurrency), \"connections\": \(options.connections),"
        + " \"requests_per_second\": \(Int(requestsPerSecond)), \"p50_ms\": \(String(format: "%.3f", percentile(0.5, of: latencies))),"
        + " \"p99_ms\": \(String(format: "%.3f", percentile(0.99, of: latencies))), \"errors\": \(errors)}")

