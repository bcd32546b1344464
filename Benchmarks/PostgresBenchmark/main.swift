// postgres-benchmark: single-row parameterized SELECT and INSERT round trips per second through PostgresPool, at
// the given concurrencies. Run by Benchmarks/postgres.sh, which creates the tables and runs pgbench alongside.
//
//   postgres-benchmark --url URL [--seconds 10] [--concurrency 1,32] [--rows 100000] [--workload select,insert]
//                      [--executor pool,global] [--postgres-pid PID]
//
// `--executor pool`: the workers prefer `PostgresPool.taskExecutor` (each continues on the poller thread that read its
// answers); `global`: no preference (each answer wakes a thread of the global executor).
//
// Prints one line per run: `swift <workload> <executor> <concurrency> <round trips/s> <client CPU µs/statement>
// <Postgres CPU µs/statement>`, CPU from /proc over the measured window (Postgres: the postmaster, its backends and
// the children it reaped; 0 without --postgres-pid).
import Foundation
import HabitFlowPostgres
import Logging
import Synchronization

var options = [
    "--seconds": "10", "--concurrency": "1,32", "--rows": "100000", "--workload": "select,insert",
    "--executor": "pool,global", "--postgres-pid": "0",
]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst(), let value = arguments.popFirst() { options[name] = value }
guard let url = options["--url"], let seconds = Int(options["--seconds"]!), let rows = Int64(options["--rows"]!),
    let postmaster = Int32(options["--postgres-pid"]!)
else {
    FileHandle.standardError.write(
        Data("usage: postgres-benchmark --url URL [--seconds N] [--concurrency 1,32] [--executor pool,global]\n".utf8))
    exit(64)
}
let concurrencies = options["--concurrency"]!.split(separator: ",").compactMap { Int($0) }
let logger = Logger(label: "postgres-benchmark")

/// Completed round trips across workers.
final class Counter: Sendable { let value = Atomic<Int>(0) }

enum Workload: String, CaseIterable { case select, insert }
enum ExecutorChoice: String, CaseIterable { case pool, global }

/// CPU seconds (user + system, all threads) of process `pid`, from /proc/PID/stat, plus those of its exited children
/// when `withReapedChildren` (backends that ended during the window, autovacuum workers).
func cpuSeconds(_ pid: Int32, withReapedChildren: Bool = false) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let nameEnd = stat.lastIndex(of: ")")
    else { return 0 }
    // After "pid (comm) ": utime, stime, cutime and cstime are the 12th to 15th fields.
    let fields = stat[stat.index(nameEnd, offsetBy: 2)...].split(separator: " ").map { Int($0) ?? 0 }
    guard fields.count > 14 else { return 0 }
    let ticks = fields[11] + fields[12] + (withReapedChildren ? fields[13] + fields[14] : 0)
    return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Postgres's CPU seconds: the postmaster and its children (`/proc/PID/task/PID/children`: the backends).
func postgresCPUSeconds() -> Double {
    guard postmaster > 0 else { return 0 }
    let children = (try? String(contentsOfFile: "/proc/\(postmaster)/task/\(postmaster)/children", encoding: .utf8))
    return (children ?? "").split(separator: " ").compactMap { Int32($0) }.reduce(
        cpuSeconds(postmaster, withReapedChildren: true)
    ) { $0 + cpuSeconds($1) }
}

struct Measurement {
    var rate: Double
    var clientMicroseconds: Double
    var postgresMicroseconds: Double
}

func measure(
    _ workload: Workload, executor: ExecutorChoice, concurrency: Int, url: String, seconds: Int, rows: Int64,
    logger: Logger
) async throws -> Measurement {
    var configuration = PostgresPool.Configuration(connectionString: url)
    configuration.maximumConnections = concurrency
    let pool = PostgresPool(configuration: configuration, logger: logger)
    let completed = Counter()
    let clock = ContinuousClock()
    let warmUpEnd = clock.now + .seconds(1)
    let end = warmUpEnd + .seconds(seconds)
    let preferred: (any TaskExecutor)? = executor == .pool ? pool.taskExecutor : nil
    var cpuAtStart = (client: 0.0, postgres: 0.0)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<concurrency {
            group.addTask(executorPreference: preferred) {
                // Ids spread over the table by a Weyl sequence (golden-ratio steps): as uniform as pgbench's
                // random(), without the getrandom system call per statement that the system generator makes.
                var sequence = UInt64(worker) &* 0x2545_F491_4F6C_DD1D
                var count = 0
                var counting = false
                while true {
                    let now = clock.now
                    if now >= end { break }
                    if !counting && now >= warmUpEnd { counting = true }
                    switch workload {
                    case .select:
                        sequence &+= 0x9E37_79B9_7F4A_7C15
                        let id = Int64(sequence % UInt64(rows)) + 1
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
        try await Task.sleep(until: warmUpEnd)
        cpuAtStart = (cpuSeconds(getpid()), postgresCPUSeconds())
        try await group.waitForAll()
    }
    let cpuAtEnd = (client: cpuSeconds(getpid()), postgres: postgresCPUSeconds())
    await pool.shutdown()
    let statements = Double(max(completed.value.load(ordering: .relaxed), 1))
    return Measurement(
        rate: statements / Double(seconds),
        clientMicroseconds: (cpuAtEnd.client - cpuAtStart.client) * 1e6 / statements,
        postgresMicroseconds: (cpuAtEnd.postgres - cpuAtStart.postgres) * 1e6 / statements)
}

for workload in options["--workload"]!.split(separator: ",").compactMap({ Workload(rawValue: String($0)) }) {
    for executor in options["--executor"]!.split(separator: ",").compactMap({ ExecutorChoice(rawValue: String($0)) }) {
        for concurrency in concurrencies {
            let result = try await measure(
                workload, executor: executor, concurrency: concurrency, url: url, seconds: seconds, rows: rows,
                logger: logger)
            print(
                "swift \(workload.rawValue) \(executor.rawValue) \(concurrency) \(Int(result.rate))",
                Int(result.clientMicroseconds), Int(result.postgresMicroseconds))
        }
    }
}
