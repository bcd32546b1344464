// habits-benchmark: the week view and mark-done of a running habits service (habitflow-habits), for a user with 15
// habits and five years of daily entries, at the given concurrencies. Run by Benchmarks/habits.sh, which starts a
// throwaway Postgres and the service.
//
//   habits-benchmark --port PORT --database-url URL --secret SECRET [--seconds 10] [--concurrency 1,32]
//                    [--service-pid PID] [--postgres-pid POSTMASTER_PID] [--metrics-port SERVICE_METRICS_PORT]
//
// Seeds through the API (user, habits) and SQL (five years of entries in one INSERT ... SELECT), and 32 more users
// with 15 habits each for mark-done spread over many users (one user's check-ins queue on that user's row lock by
// design, so "mark done (1 user)" at concurrency 32 measures that queue, not the service), then prints one
// line per run: workload, concurrency, requests, requests/s, p50 and p99 latency in ms as the client saw it; p50 and
// p99 server latency (the service's own handling-time histogram, interpolated within its buckets) and the exact share
// of calls within issue #7's p99 goal (5 ms week view, 10 ms mark-done); errors; and the CPU time per request of the
// service, of Postgres (postmaster and backends) and of this client.
import HabitFlowInternalCredential
import Foundation
import HabitFlowBenchmarkSupport
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import Logging
import Synchronization

var options = ["--seconds": "10", "--concurrency": "1,32", "--secret": InternalCredential.localDevelopmentSecret]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst(), let value = arguments.popFirst() { options[name] = value }
guard let port = options["--port"].flatMap(Int.init), let databaseURL = options["--database-url"],
    let secret = options["--secret"], let seconds = options["--seconds"].flatMap(Int.init)
else {
    FileHandle.standardError.write(
        Data("usage: habits-benchmark --port PORT --database-url URL [--secret S] [--seconds N] [--concurrency 1,32]\n".utf8))
    exit(64)
}
let concurrencies = (options["--concurrency"] ?? "1,32").split(separator: ",").compactMap { Int($0) }
let servicePID = options["--service-pid"].flatMap(Int32.init)
let metricsPort = options["--metrics-port"].flatMap(Int.init)
let postmasterPID = options["--postgres-pid"].flatMap(Int32.init)
var logger = Logger(label: "habits-benchmark")
logger.logLevel = .warning

func progress(_ message: String) {
    FileHandle.standardError.write(Data("habits-benchmark: \(message)\n".utf8))
}

let channel = try RPCChannel(
    configuration: RPCChannelConfiguration(host: "127.0.0.1", port: port),
    interceptors: [InternalCredentialClientInterceptor(credential: InternalCredential(secret: secret), caller: "gateway")],
    logger: logger)
let api = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
var poolConfiguration = PostgresPool.Configuration(connectionString: databaseURL)
poolConfiguration.maximumConnections = 2
let pool = PostgresPool(configuration: poolConfiguration, logger: logger)

// MARK: Seeding

/// A user with 15 habits (targets 1...7) and, per habit, one entry a day for the five years up to yesterday.
func seedUser(yearsOfEntries: Int) async throws -> (user: UUID, habits: [String]) {
    let user = UUID()
    let options = CallOptions.onBehalf(of: user)
    var habits: [String] = []
    for index in 1...15 {
        let habit = try await api.createHabit(
            .with {
                $0.name = "Habit \(index)"
                $0.weeklyTarget = Int32(index % 7 + 1)
            }, options: options)
        habits.append(habit.id)
    }
    guard yearsOfEntries > 0 else { return (user, habits) }
    // Backdate the habits so the history is theirs, then add the entries in one statement.
    try await pool.execute(
        """
        UPDATE habits SET live_from = live_from - make_interval(years => \(Int32(yearsOfEntries)))::interval \
        WHERE user_id = \(user)
        """)
    try await pool.execute(
        """
        UPDATE habit_targets SET week_start = date_trunc('week', week_start - make_interval(years => \(Int32(yearsOfEntries))))::date \
        WHERE user_id = \(user)
        """)
    let inserted = try await pool.execute(
        """
        INSERT INTO entries (user_id, id, habit_id, local_date, value, created_at, change_seq) \
        SELECT h.user_id, gen_random_uuid(), h.id, d::date, 1, now(), 0 \
        FROM habits h, generate_series(current_date - make_interval(years => \(Int32(yearsOfEntries))), current_date - 1, '1 day') AS d \
        WHERE h.user_id = \(user)
        """)
    try await pool.execute("ANALYZE entries")
    progress("seeded user \(user) with 15 habits and \(inserted) entries")
    return (user, habits)
}

// MARK: Measuring

enum Workload: String { case weekView = "week-view", markDone = "mark-done" }

/// Runs `concurrency` workers for a 2 s warm-up and `seconds` of measurement, each calling one request after another.
/// Worker `i` calls as `users[i % users.count]`.
func measure(
    _ workload: Workload, users: [(user: UUID, habits: [String])], concurrency: Int, label: String
) async throws {
    let clock = ContinuousClock()
    let warmUpEnd = clock.now + .seconds(2)
    let end = warmUpEnd + .seconds(seconds)
    let samples = Samples()
    let method = workload == .weekView
        ? Habitflow_Habits_V1_HabitsService.Method.getWeek : Habitflow_Habits_V1_HabitsService.Method.markHabitDone
    let readings = Readings()
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            // CPU and the service's own metrics are read at the end of the warm-up and at the end of the run.
            try? await clock.sleep(until: warmUpEnd)
            readings.add(await reading(of: method))
            try? await clock.sleep(until: end)
            readings.add(await reading(of: method))
        }
        for worker in 0..<concurrency {
            let (user, habits) = users[worker % users.count]
            let options = CallOptions.onBehalf(of: user, timeout: .seconds(10))
            group.addTask {
                var latencies: [Int64] = []
                var errors = 0
                var iteration = worker
                while clock.now < end {
                    let started = clock.now
                    do {
                        switch workload {
                        case .weekView:
                            _ = try await api.getWeek(.init(), options: options)
                        case .markDone:
                            _ = try await api.markHabitDone(
                                .with { $0.habitID = habits[iteration % habits.count] }, options: options)
                        }
                        let finished = clock.now
                        if started >= warmUpEnd {
                            let (secondsPart, attoseconds) = (finished - started).components
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
    printResult(
        label: label, workload: workload, concurrency: concurrency, latencies: latencies, errors: errors,
        window: readings.window)
}

/// What is read at the start and at the end of a measured window.
struct Reading: Sendable {
    /// CPU seconds used so far by the service, Postgres and the client.
    var cpu: (service: Double, postgres: Double, client: Double)
    /// The service's own metrics of the method measured (`nil` without `--metrics-port`).
    var metrics: ServiceMethodMetrics?
}

/// A reading now; the client's CPU is this process's unless given (h2load's).
func reading(of method: MethodDescriptor, clientCPU: Double = ProcessCPU.seconds(getpid())) async -> Reading {
    let service = servicePID.map(ProcessCPU.seconds) ?? 0
    let postgres = postmasterPID.map { ProcessCPU.postgresSeconds(postmaster: $0) } ?? 0
    var metrics: ServiceMethodMetrics?
    if let metricsPort {
        do {
            metrics = try await ServiceMethodMetrics.read(metricsPort: metricsPort, method: method)
        } catch {
            progress("could not read the service's metrics on port \(metricsPort): \(error)")
        }
    }
    return Reading(cpu: (service, postgres, clientCPU), metrics: metrics)
}

/// The readings of a measurement, taken by a task of its own while the workers run.
final class Readings: Sendable {
    private let readings = Mutex<[Reading]>([])

    func add(_ reading: Reading) { readings.withLock { $0.append(reading) } }

    var window: (start: Reading, end: Reading)? {
        readings.withLock { $0.count >= 2 ? ($0[0], $0[$0.count - 1]) : nil }
    }
}

/// Prints one row: latencies in nanoseconds as the client saw them; CPU and the service's metrics over the window.
func printResult(
    label: String, workload: Workload, concurrency: Int, latencies: [Int64], errors: Int,
    window: (start: Reading, end: Reading)?
) {
    let used: (service: Double, postgres: Double, client: Double) = window.map { window in
        (
            window.end.cpu.service - window.start.cpu.service, window.end.cpu.postgres - window.start.cpu.postgres,
            window.end.cpu.client - window.start.cpu.client
        )
    } ?? (0, 0, 0)
    let server = window.flatMap { window in
        window.end.metrics.flatMap { end in window.start.metrics.map { end.since($0).handlingTime } }
    }
    let sorted = latencies.sorted()
    func percentile(_ fraction: Double) -> Double { Double(nearestRank(sorted, fraction) ?? 0) / 1_000_000 }
    let rate = Double(sorted.count) / Double(seconds)
    func perRequest(_ seconds: Double) -> String {
        sorted.isEmpty ? "-" : String(Int((seconds / Double(sorted.count) * 1_000_000).rounded()))
    }
    func milliseconds(_ seconds: Double?) -> String { seconds.map { String(format: "%.2f", $0 * 1000) } ?? "-" }
    printRow([
        label, String(concurrency), String(sorted.count), String(Int(rate.rounded())),
        String(format: "%.2f", percentile(0.50)), String(format: "%.2f", percentile(0.99)),
        milliseconds(server?.quantile(0.50)), milliseconds(server?.quantile(0.99)),
        server?.share(atMost: goal(workload)).map { String(format: "%.2f%%", $0 * 100) } ?? "-", String(errors),
        perRequest(used.service), perRequest(used.postgres), perRequest(used.client),
    ])
}

// MARK: The week view driven by h2load

/// The week view at `concurrency` streams on one connection, driven by h2load (nghttp2-client) instead of our RPC
/// client: a load generator written in C that needs a fraction of our client's CPU per call, so the two cores go to
/// the service and Postgres as they would with clients on other machines. The request is signed as the gateway signs
/// it (valid for five minutes, far longer than a run); h2load cannot read gRPC trailers, so the errors column counts
/// non-200 answers plus the calls the service itself counted as failed (not as cancelled: h2load resets the streams
/// still open when its time is up). Client CPU is h2load's (RUSAGE_CHILDREN).
func measureWeekViewWithH2load(user: UUID, concurrency: Int) async throws {
    let method = Habitflow_Habits_V1_HabitsService.Method.getWeek
    let headers = H2load.gatewayCredential(for: user, method: method, secret: secret)
    // One gRPC message: not compressed, length 0 (an empty GetWeekRequest: the caller's current week).
    let h2load = H2load(
        port: port, method: method, body: Data([0, 0, 0, 0, 0]), headers: headers, concurrency: concurrency)
    _ = try h2load.run(seconds: 2)
    let start = await reading(of: method, clientCPU: H2load.childrenCPUSeconds())
    var (latencies, errors) = try h2load.run(seconds: seconds)
    let end = await reading(of: method, clientCPU: H2load.childrenCPUSeconds())
    if let endMetrics = end.metrics, let startMetrics = start.metrics {
        errors += Int(endMetrics.since(startMetrics).counts.failed)
    }
    printResult(
        label: "week view, h2load", workload: .weekView, concurrency: concurrency, latencies: latencies,
        errors: errors, window: (start, end))
}

/// Issue #7's p99 goal at concurrency 32: the service answers a week view within 5 ms, a mark-done within 10 ms.
func goal(_ workload: Workload) -> Double {
    workload == .weekView ? 0.005 : 0.010
}

let columnWidths = [22, 11, 9, 7, 8, 8, 10, 10, 12, 6, 13, 14, 12]

func printRow(_ cells: [String]) {
    var line = ""
    for (index, cell) in cells.enumerated() {
        let width = columnWidths[index]
        let padding = String(repeating: " ", count: max(0, width - cell.count))
        line += index == 0 ? cell + padding : " " + padding + cell
    }
    print(line)
}

/// The plan of the statement that reads a week view's habits (HabitsStore.weekViewData, when the cached view is not
/// current) for the seeded user and this week: the
/// entries come from a range scan of `entries_by_habit_day` per habit, whatever the length of the history.
func explainWeekStatement(user: UUID) async throws {
    let rows = try await pool.query(
        """
        EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) \
        SELECT h.*, ARRAY(SELECT e.local_date - date_trunc('week', current_date)::date FROM entries e \
        WHERE e.user_id = h.user_id AND e.habit_id = h.id AND e.deleted_at IS NULL \
        AND e.local_date BETWEEN date_trunc('week', current_date)::date AND date_trunc('week', current_date)::date + 6) \
        AS week_days FROM habit_details h WHERE h.user_id = \(user) AND h.live_from <= current_date + 6 \
        AND (h.deleted_on IS NULL OR h.deleted_on > current_date + 6) ORDER BY h.created_seq
        """)
    progress("plan of the week view's habits-with-entries statement:")
    for row in rows { progress("  " + (try row.decode(0, as: String.self))) }
}

let seeded = try await seedUser(yearsOfEntries: 5)
let fresh = try await seedUser(yearsOfEntries: 0)
// Check-ins of many people at once: one person does not send 32 concurrent check-ins, and one user's writes queue
// on that user's row lock (and each commit's WAL flush) by design, to keep the change feed in order.
var checkInUsers: [(user: UUID, habits: [String])] = []
for _ in 0..<32 { checkInUsers.append(try await seedUser(yearsOfEntries: 0)) }
progress("seeded \(checkInUsers.count) users with 15 habits each for the many-users check-ins")
try await explainWeekStatement(user: seeded.user)
printRow([
    "workload", "concurrency", "requests", "req/s", "p50 ms", "p99 ms", "server p50", "server p99", "within goal",
    "errors", "service µs/req",
    "Postgres µs/req", "client µs/req",
])
for concurrency in concurrencies {
    try await measure(.weekView, users: [seeded], concurrency: concurrency, label: "week view (5 years)")
}
for concurrency in concurrencies {
    try await measureWeekViewWithH2load(user: seeded.user, concurrency: concurrency)
}
try await measure(.weekView, users: [fresh], concurrency: 1, label: "week view (no history)")
for concurrency in concurrencies {
    try await measure(.markDone, users: [seeded], concurrency: concurrency, label: "mark done (1 user)")
}
for concurrency in concurrencies where concurrency > 1 {
    try await measure(.markDone, users: checkInUsers, concurrency: concurrency, label: "mark done (32 users)")
}
await channel.close()
await pool.shutdown()
