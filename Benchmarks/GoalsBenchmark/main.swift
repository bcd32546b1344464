// goals-benchmark: ListGoals of a running goals service (habitflow-goals, calling habitflow-habits) for a user with 10
// active goals, each linked to 3 habits with five years of daily entries, at the given concurrencies. Run by
// Benchmarks/goals.sh, which starts a throwaway Postgres and both services.
//
//   goals-benchmark --goals-port PORT --habits-port PORT --habits-database-url URL --secret SECRET [--seconds 10]
//                   [--concurrency 1,32] [--goals-pid PID] [--habits-pid PID] [--postgres-pid PID]
//                   [--goals-metrics-port PORT] [--habits-metrics-port PORT]
//
// Seeds through the APIs (habits, goals started five years ago) and SQL (the entries in one INSERT ... SELECT), then
// prints one line per run: workload, concurrency, requests, requests/s, p50 and p99 latency in ms as the client saw
// it; p50 and p99 server latency (goals' own handling-time histogram) with the exact share of calls within issue
// #23's goal (p99 under 5 ms at concurrency 32); the calls goals made to habits per list (goal: at most one);
// errors; and the CPU time per request of goals, habits, Postgres and this client.
import HabitFlowInternalCredential
import Foundation
import HabitFlowBenchmarkSupport
import HabitFlowGoalsProtos
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import Logging
import Synchronization

var options = ["--seconds": "10", "--concurrency": "1,32", "--secret": InternalCredential.localDevelopmentSecret]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst(), let value = arguments.popFirst() { options[name] = value }
guard let goalsPort = options["--goals-port"].flatMap(Int.init), let habitsPort = options["--habits-port"].flatMap(Int.init),
    let databaseURL = options["--habits-database-url"], let secret = options["--secret"],
    let seconds = options["--seconds"].flatMap(Int.init)
else {
    FileHandle.standardError.write(
        Data("usage: goals-benchmark --goals-port P --habits-port P --habits-database-url URL [--secret S] [--seconds N]\n".utf8))
    exit(64)
}
let concurrencies = (options["--concurrency"] ?? "1,32").split(separator: ",").compactMap { Int($0) }
let goalsPID = options["--goals-pid"].flatMap(Int32.init)
let habitsPID = options["--habits-pid"].flatMap(Int32.init)
let postmasterPID = options["--postgres-pid"].flatMap(Int32.init)
let goalsMetricsPort = options["--goals-metrics-port"].flatMap(Int.init)
let habitsMetricsPort = options["--habits-metrics-port"].flatMap(Int.init)
let logger: Logger = {
    var logger = Logger(label: "goals-benchmark")
    logger.logLevel = .warning
    return logger
}()

func progress(_ message: String) {
    FileHandle.standardError.write(Data("goals-benchmark: \(message)\n".utf8))
}

func channel(port: Int) throws -> RPCChannel {
    try RPCChannel(
        configuration: RPCChannelConfiguration(host: "127.0.0.1", port: port),
        interceptors: [
            InternalCredentialClientInterceptor(credential: InternalCredential(secret: secret), caller: "gateway")
        ],
        logger: logger)
}

let goalsChannel = try channel(port: goalsPort)
let habitsChannel = try channel(port: habitsPort)
let goals = Habitflow_Goals_V1_GoalsService.Client(transport: goalsChannel)
let habits = Habitflow_Habits_V1_HabitsService.Client(transport: habitsChannel)
var poolConfiguration = PostgresPool.Configuration(connectionString: databaseURL)
poolConfiguration.maximumConnections = 2
let pool = PostgresPool(configuration: poolConfiguration, logger: logger)

// MARK: Seeding

/// A user with 15 habits, one entry a day on each for the five years up to yesterday, and 10 ongoing goals started
/// five years ago, each linked to 3 of the habits (5 weekly-habit goals, 5 count goals).
func seedUser() async throws -> (user: UUID, habits: [String]) {
    let user = UUID()
    let options = CallOptions.onBehalf(of: user)
    var habitIDs: [String] = []
    for index in 1...15 {
        habitIDs.append(try await habits.createHabit(.with { $0.name = "Habit \(index)" }, options: options).id)
    }
    try await pool.execute(
        "UPDATE habits SET live_from = live_from - interval '5 years' WHERE user_id = \(user)")
    try await pool.execute(
        """
        UPDATE habit_targets SET week_start = date_trunc('week', week_start - interval '5 years')::date \
        WHERE user_id = \(user)
        """)
    let inserted = try await pool.execute(
        """
        INSERT INTO entries (user_id, id, habit_id, local_date, value, created_at, change_seq) \
        SELECT h.user_id, gen_random_uuid(), h.id, d::date, 1, now(), 0 \
        FROM habits h, generate_series(current_date - interval '5 years', current_date - 1, '1 day') AS d \
        WHERE h.user_id = \(user)
        """)
    try await pool.execute("ANALYZE entries")
    let calendar = Calendar(identifier: .gregorian)
    let start = calendar.dateComponents(in: TimeZone(identifier: "UTC")!, from: Date().addingTimeInterval(-5 * 365.25 * 86_400))
    for index in 0..<10 {
        _ = try await goals.createGoal(
            .with {
                $0.title = "Goal \(index + 1)"
                $0.type = index < 5 ? .weeklyHabit : .count
                $0.target.value = index < 5 ? 5 : 10_000
                $0.horizon = .ongoing
                $0.startDate = .with {
                    $0.year = Int32(start.year!)
                    $0.month = Int32(start.month!)
                    $0.day = Int32(start.day!)
                }
                $0.habitIds = (0..<3).map { habitIDs[(index * 3 + $0) % habitIDs.count] }
            }, options: options)
    }
    progress("seeded user \(user): 15 habits, \(inserted) entries, 10 goals linked to 3 habits each")
    return (user, habitIDs)
}

// MARK: Measuring

/// CPU seconds so far and the services' own metrics of the methods measured.
struct Reading: Sendable {
    var cpu: (goals: Double, habits: Double, postgres: Double, client: Double)
    var list: ServiceMethodMetrics?
    var aggregate: ServiceMethodMetrics?
}

let listMethod = Habitflow_Goals_V1_GoalsService.Method.listGoals
let aggregateMethod = Habitflow_Habits_V1_HabitsInternal.Method.aggregateEntries

/// A reading now; the client's CPU is this process's unless given (h2load's).
func reading(clientCPU: Double = ProcessCPU.seconds(getpid())) async -> Reading {
    func metrics(_ port: Int?, _ method: MethodDescriptor) async -> ServiceMethodMetrics? {
        guard let port else { return nil }
        do {
            return try await ServiceMethodMetrics.read(metricsPort: port, method: method)
        } catch {
            progress("could not read metrics on port \(port): \(error)")
            return nil
        }
    }
    return Reading(
        cpu: (
            goalsPID.map(ProcessCPU.seconds) ?? 0, habitsPID.map(ProcessCPU.seconds) ?? 0,
            postmasterPID.map { ProcessCPU.postgresSeconds(postmaster: $0) } ?? 0, clientCPU
        ),
        list: await metrics(goalsMetricsPort, listMethod), aggregate: await metrics(habitsMetricsPort, aggregateMethod))
}

final class Readings: Sendable {
    private let readings = Mutex<[Reading]>([])
    func add(_ reading: Reading) { readings.withLock { $0.append(reading) } }
    var window: (start: Reading, end: Reading)? {
        readings.withLock { $0.count >= 2 ? ($0[0], $0[$0.count - 1]) : nil }
    }
}

/// `concurrency` workers list the user's goals one call after another for a 2 s warm-up and `seconds` measured.
/// With `checkInFirst`, each list follows a check-in (not timed), so every list derives progress afresh.
func measure(user: (user: UUID, habits: [String]), concurrency: Int, checkInFirst: Bool, label: String) async {
    let clock = ContinuousClock()
    let warmUpEnd = clock.now + .seconds(2)
    let end = warmUpEnd + .seconds(seconds)
    let samples = Samples()
    let readings = Readings()
    let options = CallOptions.onBehalf(of: user.user, timeout: .seconds(10))
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            try? await clock.sleep(until: warmUpEnd)
            readings.add(await reading())
            try? await clock.sleep(until: end)
            readings.add(await reading())
        }
        for worker in 0..<concurrency {
            group.addTask {
                var latencies: [Int64] = []
                var errors = 0
                var iteration = worker
                while clock.now < end {
                    if checkInFirst {
                        _ = try? await habits.markHabitDone(
                            .with { $0.habitID = user.habits[iteration % user.habits.count] }, options: options)
                    }
                    let started = clock.now
                    do {
                        _ = try await goals.listGoals(.init(), options: options)
                        if started >= warmUpEnd {
                            let (secondsPart, attoseconds) = (clock.now - started).components
                            latencies.append(secondsPart * 1_000_000_000 + attoseconds / 1_000_000_000)
                        }
                    } catch {
                        if started >= warmUpEnd { errors += 1 }
                    }
                    iteration += 1
                }
                samples.add(latencies, errors: errors)
            }
        }
    }
    let (latencies, errors) = samples.result
    printResult(label: label, concurrency: concurrency, latencies: latencies, errors: errors, window: readings.window)
}

/// The user's goals listed at `concurrency` streams on one connection by h2load (a C load generator: the cores go to
/// the services and Postgres, as with clients on other machines), signed as the gateway signs it.
func measureWithH2load(user: UUID, concurrency: Int) async throws {
    let headers = H2load.gatewayCredential(for: user, method: listMethod, secret: secret)
    // One gRPC message: not compressed, length 0 (an empty ListGoalsRequest).
    let h2load = H2load(
        port: goalsPort, method: listMethod, body: Data([0, 0, 0, 0, 0]), headers: headers, concurrency: concurrency)
    _ = try h2load.run(seconds: 2)
    let start = await reading(clientCPU: H2load.childrenCPUSeconds())
    var (latencies, errors) = try h2load.run(seconds: seconds)
    let end = await reading(clientCPU: H2load.childrenCPUSeconds())
    if let endList = end.list, let startList = start.list { errors += Int(endList.since(startList).counts.failed) }
    printResult(
        label: "list goals, h2load", concurrency: concurrency, latencies: latencies, errors: errors, window: (start, end))
}

/// Prints one row: latencies in nanoseconds as the client saw them; CPU and the services' metrics over the window.
func printResult(
    label: String, concurrency: Int, latencies: [Int64], errors: Int, window: (start: Reading, end: Reading)?
) {
    let sorted = latencies.sorted()
    func percentile(_ fraction: Double) -> String {
        String(format: "%.2f", Double(nearestRank(sorted, fraction) ?? 0) / 1_000_000)
    }
    func perRequest(_ seconds: Double) -> String {
        sorted.isEmpty ? "-" : String(Int((seconds / Double(sorted.count) * 1_000_000).rounded()))
    }
    func milliseconds(_ seconds: Double?) -> String { seconds.map { String(format: "%.2f", $0 * 1000) } ?? "-" }
    let server = window.flatMap { window in window.end.list.flatMap { end in window.start.list.map { end.since($0) } } }
    let habitsCalls = window.flatMap { window in
        window.end.aggregate.flatMap { end in window.start.aggregate.map { end.since($0).handlingTime.count } }
    }
    let lists = server?.handlingTime.count ?? 0
    let used = window.map { window in
        (
            window.end.cpu.goals - window.start.cpu.goals, window.end.cpu.habits - window.start.cpu.habits,
            window.end.cpu.postgres - window.start.cpu.postgres, window.end.cpu.client - window.start.cpu.client
        )
    } ?? (0, 0, 0, 0)
    printRow([
        label, String(concurrency), String(sorted.count), String(Int((Double(sorted.count) / Double(seconds)).rounded())),
        percentile(0.50), percentile(0.99), milliseconds(server?.handlingTime.quantile(0.50)),
        milliseconds(server?.handlingTime.quantile(0.99)),
        server?.handlingTime.share(atMost: 0.005).map { String(format: "%.2f%%", $0 * 100) } ?? "-",
        habitsCalls.map { lists > 0 ? String(format: "%.2f", $0 / lists) : "-" } ?? "-", String(errors),
        perRequest(used.0), perRequest(used.1), perRequest(used.2), perRequest(used.3),
    ])
}

let columnWidths = [26, 11, 9, 7, 8, 8, 10, 10, 12, 13, 6, 11, 12, 14, 12]

func printRow(_ cells: [String]) {
    var line = ""
    for (index, cell) in cells.enumerated() {
        let width = columnWidths[index]
        let padding = String(repeating: " ", count: max(0, width - cell.count))
        line += index == 0 ? cell + padding : " " + padding + cell
    }
    print(line)
}

let seeded = try await seedUser()
let first = try await goals.listGoals(.init(), options: .onBehalf(of: seeded.user))
progress("the user's goals: " + first.goals.map { "\($0.title) \($0.progress.display)" }.joined(separator: ", "))
printRow([
    "workload", "concurrency", "requests", "req/s", "p50 ms", "p99 ms", "server p50", "server p99", "within 5 ms",
    "habits calls", "errors", "goals µs", "habits µs", "Postgres µs", "client µs",
])
for concurrency in concurrencies {
    await measure(user: seeded, concurrency: concurrency, checkInFirst: false, label: "list goals (5 years)")
}
for concurrency in concurrencies {
    try await measureWithH2load(user: seeded.user, concurrency: concurrency)
}
await measure(user: seeded, concurrency: 1, checkInFirst: true, label: "list goals after a check-in")
await goalsChannel.close()
await habitsChannel.close()
await pool.shutdown()
