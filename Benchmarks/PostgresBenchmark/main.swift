// postgres-benchmark: single-row parameterized SELECT and INSERT round trips per second through PostgresPool, at
// the given concurrencies. Run by Benchmarks/postgres.sh, which creates the tables and runs pgbench alongside.
//
//   postgres-benchmark --url URL [--seconds 10] [--concurrency 1,32] [--rows 100000] [--workload select,insert]
//
// Prints one line per run: `swift <select|insert> <concurrency> <round trips per second>`.
import Foundation
import HabitFlowPostgres
import Logging
import Synchronization

var options = ["--seconds": "10", "--concurrency": "1,32", "--rows": "100000", "--workload": "select,insert"]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst(), let value = arguments.popFirst() { options[name] = value }
guard let url = options["--url"], let seconds = Int(options["--seconds"]!), let rows = Int64(options["--rows"]!) else {
    FileHandle.standardError.write(Data("usage: postgres-benchmark --url URL [--seconds N] [--concurrency 1,32]\n".utf8))
    exit(64)
}
let concurrencies = options["--concurrency"]!.split(separator: ",").compactMap { Int($0) }
let logger = Logger(label: "postgres-benchmark")

/// Completed round trips across workers.
final class Counter: Sendable { let value = Atomic<Int>(0) }

enum Workload: String, CaseIterable { case select, insert }

func measure(
    _ workload: Workload, concurrency: Int, url: String, seconds: Int, rows: Int64, logger: Logger
) async throws -> Double {
    var configuration = PostgresPool.Configuration(connectionString: url)
    configuration.maximumConnections = concurrency
    let pool = PostgresPool(configuration: configuration, logger: logger)
    let completed = Counter()
    let clock = ContinuousClock()
    let warmUpEnd = clock.now + .seconds(1)
    let end = warmUpEnd + .seconds(seconds)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<concurrency {
            group.addTask {
                var count = 0
                var counting = false
                while true {
                    let now = clock.now
                    if now >= end { break }
                    if !counting && now >= warmUpEnd { counting = true }
                    switch workload {
                    case .select:
                        let id = Int64.random(in: 1...rows)
                        let row = try await pool.queryRow("SELECT value FROM bench_select WHERE id = \(id)")
                        _ = try row?.decode(0, as: String.self)
                    case .insert:
                        try await pool.execute("INSERT INTO bench_insert (worker, value) VALUES (\(worker), \("value"))")
                    }
                    if counting { count += 1 }
                }
                completed.value.add(count, ordering: .relaxed)
            }
        }
        try await group.waitForAll()
    }
    await pool.shutdown()
    return Double(completed.value.load(ordering: .relaxed)) / Double(seconds)
}

for workload in options["--workload"]!.split(separator: ",").compactMap({ Workload(rawValue: String($0)) }) {
    for concurrency in concurrencies {
        let rate = try await measure(
            workload, concurrency: concurrency, url: url, seconds: seconds, rows: rows, logger: logger)
        print("swift \(workload.rawValue) \(concurrency) \(Int(rate))")
    }
}
