// social-benchmark: GetLeaderboard of a running social service (habitflow-social, calling habitflow-habits for the
// scores and habitflow-auth for the names) for a user with 100 friends who all share, each with habits and check-ins
// this week, at the given concurrencies. Run by Benchmarks/social.sh, which starts a throwaway Postgres and the three
// services.
//
//   social-benchmark --social-port P --habits-port P --auth-port P --social-database-url URL --secret S
//                    [--seconds 10] [--concurrency 1,32] [--social-pid PID] [--habits-pid PID] [--auth-pid PID]
//                    [--postgres-pid PID] [--social-metrics-port P] [--habits-metrics-port P] [--auth-metrics-port P]
//
// Seeds through the APIs (101 accounts registered with auth, 3 habits each in habits with 0 to 3 check-ins today) and
// SQL (the friendships in social's schema: the friends' RPCs are not needed to measure the board), then prints one
// line per run: workload, concurrency, requests, requests/s, p50 and p99 latency in ms as the client saw it; p50 and
// p99 server latency (social's own handling-time histogram) with the share of calls within the goal (p99 under
// 10 ms at concurrency 32); the calls social made to habits (GetWeeklyScores) and to auth (GetUsers) per leaderboard
// (goal: one each); errors; and the CPU time per request of social, habits, auth, Postgres and this client.
import HabitFlowInternalCredential
import Foundation
import HabitFlowAuthProtos
import HabitFlowBenchmarkSupport
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowSocialProtos
import Logging
import Synchronization

var options = ["--seconds": "10", "--concurrency": "1,32", "--secret": InternalCredential.localDevelopmentSecret]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst(), let value = arguments.popFirst() { options[name] = value }
guard let socialPort = options["--social-port"].flatMap(Int.init),
    let habitsPort = options["--habits-port"].flatMap(Int.init),
    let authPort = options["--auth-port"].flatMap(Int.init),
    let databaseURL = options["--social-database-url"], let secret = options["--secret"],
    let seconds = options["--seconds"].flatMap(Int.init)
else {
    FileHandle.standardError.write(
        Data(
            ("usage: social-benchmark --social-port P --habits-port P --auth-port P --social-database-url URL "
                + "[--secret S] [--seconds N]\n").utf8))
    exit(64)
}
let concurrencies = (options["--concurrency"] ?? "1,32").split(separator: ",").compactMap { Int($0) }
let socialPID = options["--social-pid"].flatMap(Int32.init)
let habitsPID = options["--habits-pid"].flatMap(Int32.init)
let authPID = options["--auth-pid"].flatMap(Int32.init)
let postmasterPID = options["--postgres-pid"].flatMap(Int32.init)
let socialMetricsPort = options["--social-metrics-port"].flatMap(Int.init)
let habitsMetricsPort = options["--habits-metrics-port"].flatMap(Int.init)
let authMetricsPort = options["--auth-metrics-port"].flatMap(Int.init)
let logger: Logger = {
    var logger = Logger(label: "social-benchmark")
    logger.logLevel = .warning
    return logger
}()

func progress(_ message: String) {
    FileHandle.standardError.write(Data("social-benchmark: \(message)\n".utf8))
}

func channel(port: Int) throws -> RPCChannel {
    try RPCChannel(
        configuration: RPCChannelConfiguration(host: "127.0.0.1", port: port),
        interceptors: [
            InternalCredentialClientInterceptor(credential: InternalCredential(secret: secret), caller: "gateway")
        ],
        logger: logger)
}

let socialChannel = try channel(port: socialPort)
let habitsChannel = try channel(port: habitsPort)
let authChannel = try channel(port: authPort)
let social = Habitflow_Social_V1_SocialService.Client(transport: socialChannel)
let habits = Habitflow_Habits_V1_HabitsService.Client(transport: habitsChannel)
let auth = Habitflow_Auth_V1_AuthService.Client(transport: authChannel)
var poolConfiguration = PostgresPool.Configuration(connectionString: databaseURL)
poolConfiguration.maximumConnections = 2
let pool = PostgresPool(configuration: poolConfiguration, logger: logger)

// MARK: Seeding

/// One account: registered with auth (bcrypt cost 12, the slow part of seeding), with 3 habits (target 1 a week)
/// in habits and `index % 4` of them checked in today, so the board has every kind of tie (0, 33, 67 and 100%).
func seedAccount(_ index: Int, run: String) async throws -> (id: UUID, username: String, displayName: String) {
    let username = "b\(run)_\(index)"
    let registered = try await auth.register(
        .with {
            $0.email = "\(username)@example.com"
            $0.username = username
            $0.password = "benchmark password \(run)"
            $0.displayName = "Bench \(index)"
        })
    guard let id = UUID(uuidString: registered.user.id) else { throw SeedFailed(reason: "auth answered no id") }
    let options = CallOptions.onBehalf(of: id)
    var habitIDs: [String] = []
    for number in 1...3 {
        habitIDs.append(
            try await habits.createHabit(
                .with {
                    $0.name = "Habit \(number)"
                    $0.weeklyTarget = 1
                }, options: options
            ).id)
    }
    for checkIn in 0..<(index % 4) {
        _ = try await habits.markHabitDone(.with { $0.habitID = habitIDs[checkIn % 3] }, options: options)
    }
    return (id, username, registered.user.displayName)
}

struct SeedFailed: Error { var reason: String }

/// The user at the centre and their 100 friends, the friendships written both ways in social's schema.
func seedBoard() async throws -> UUID {
    let run = String(UUID().uuidString.prefix(6)).lowercased()
    let accounts = try await withThrowingTaskGroup(of: (id: UUID, username: String, displayName: String).self) {
        group in
        var accounts: [(id: UUID, username: String, displayName: String)] = []
        for index in 0...100 {
            if index >= 4, let account = try await group.next() { accounts.append(account) }
            group.addTask { try await seedAccount(index, run: run) }
        }
        for try await account in group { accounts.append(account) }
        return accounts
    }
    guard let centre = accounts.first(where: { $0.username.hasSuffix("_0") }) else {
        throw SeedFailed(reason: "no centre account")
    }
    try await pool.transaction { transaction in
        for account in accounts {
            try await transaction.execute(
                """
                INSERT INTO users (user_id, username, display_name) \
                VALUES (\(account.id), \(account.username), \(account.displayName)) ON CONFLICT (user_id) DO NOTHING
                """)
        }
        for friend in accounts where friend.id != centre.id {
            for (user, other) in [(centre.id, friend.id), (friend.id, centre.id)] {
                try await transaction.execute(
                    """
                    INSERT INTO friendships (user_id, friend_id, since, change_seq) \
                    VALUES (\(user), \(other), now(), 0) \
                    ON CONFLICT DO NOTHING
                    """)
            }
        }
    }
    try await pool.execute("ANALYZE friendships")
    progress("seeded \(accounts.count) accounts: \(centre.username) and 100 friends, 3 habits each")
    return centre.id
}

// MARK: Measuring

/// CPU seconds so far and the services' own metrics of the methods measured.
struct Reading: Sendable {
    var cpu: [Double]  // social, habits, auth, Postgres, client
    var leaderboard: ServiceMethodMetrics?
    var scores: ServiceMethodMetrics?
    var names: ServiceMethodMetrics?
}

let leaderboardMethod = Habitflow_Social_V1_SocialService.Method.getLeaderboard
let scoresMethod = Habitflow_Habits_V1_HabitsInternal.Method.getWeeklyScores
let namesMethod = Habitflow_Auth_V1_AuthInternal.Method.getUsers

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
        cpu: [
            socialPID.map(ProcessCPU.seconds) ?? 0, habitsPID.map(ProcessCPU.seconds) ?? 0,
            authPID.map(ProcessCPU.seconds) ?? 0, postmasterPID.map { ProcessCPU.postgresSeconds(postmaster: $0) } ?? 0,
            clientCPU,
        ],
        leaderboard: await metrics(socialMetricsPort, leaderboardMethod),
        scores: await metrics(habitsMetricsPort, scoresMethod), names: await metrics(authMetricsPort, namesMethod))
}

final class Readings: Sendable {
    private let readings = Mutex<[Reading]>([])
    func add(_ reading: Reading) { readings.withLock { $0.append(reading) } }
    var window: (start: Reading, end: Reading)? {
        readings.withLock { $0.count >= 2 ? ($0[0], $0[$0.count - 1]) : nil }
    }
}

/// The whole board in one page: the request every run sends.
let request = Habitflow_Social_V1_GetLeaderboardRequest.with { $0.pageSize = 101 }

/// `concurrency` workers ask for the board one call after another for a 2 s warm-up and `seconds` measured.
func measure(user: UUID, concurrency: Int) async {
    let clock = ContinuousClock()
    let warmUpEnd = clock.now + .seconds(2)
    let end = warmUpEnd + .seconds(seconds)
    let samples = Samples()
    let readings = Readings()
    let options = CallOptions.onBehalf(of: user, timeout: .seconds(10))
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            try? await clock.sleep(until: warmUpEnd)
            readings.add(await reading())
            try? await clock.sleep(until: end)
            readings.add(await reading())
        }
        for _ in 0..<concurrency {
            group.addTask {
                var latencies: [Int64] = []
                var errors = 0
                while clock.now < end {
                    let started = clock.now
                    do {
                        _ = try await social.getLeaderboard(request, options: options)
                        if started >= warmUpEnd {
                            let (secondsPart, attoseconds) = (clock.now - started).components
                            latencies.append(secondsPart * 1_000_000_000 + attoseconds / 1_000_000_000)
                        }
                    } catch {
                        if started >= warmUpEnd { errors += 1 }
                    }
                }
                samples.add(latencies, errors: errors)
            }
        }
    }
    let (latencies, errors) = samples.result
    printResult(
        label: "leaderboard (101)", concurrency: concurrency, latencies: latencies, errors: errors,
        window: readings.window)
}

/// The board asked for at `concurrency` streams on one connection by h2load, signed as the gateway signs it.
func measureWithH2load(user: UUID, concurrency: Int) async throws {
    let headers = H2load.gatewayCredential(for: user, method: leaderboardMethod, secret: secret)
    // One gRPC message, not compressed: GetLeaderboardRequest{page_size: 101} is field 1, varint 101.
    let h2load = H2load(
        port: socialPort, method: leaderboardMethod, body: Data([0, 0, 0, 0, 2, 0x08, 101]), headers: headers,
        concurrency: concurrency)
    _ = try h2load.run(seconds: 2)
    let start = await reading(clientCPU: H2load.childrenCPUSeconds())
    var (latencies, errors) = try h2load.run(seconds: seconds)
    let end = await reading(clientCPU: H2load.childrenCPUSeconds())
    if let endBoard = end.leaderboard, let startBoard = start.leaderboard {
        errors += Int(endBoard.since(startBoard).counts.failed)
    }
    printResult(
        label: "leaderboard (101), h2load", concurrency: concurrency, latencies: latencies, errors: errors,
        window: (start, end))
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
    func since(_ metrics: KeyPath<Reading, ServiceMethodMetrics?>) -> ServiceMethodMetrics? {
        window.flatMap { window in
            window.end[keyPath: metrics].flatMap { end in window.start[keyPath: metrics].map { end.since($0) } }
        }
    }
    let server = since(\.leaderboard)
    let boards = server?.handlingTime.count ?? 0
    func perBoard(_ metrics: ServiceMethodMetrics?) -> String {
        metrics.map { boards > 0 ? String(format: "%.2f", $0.handlingTime.count / boards) : "-" } ?? "-"
    }
    let used = window.map { window in zip(window.end.cpu, window.start.cpu).map { $0 - $1 } } ?? [0, 0, 0, 0, 0]
    printRow(
        [
            label, String(concurrency), String(sorted.count),
            String(Int((Double(sorted.count) / Double(seconds)).rounded())), percentile(0.50), percentile(0.99),
            milliseconds(server?.handlingTime.quantile(0.50)), milliseconds(server?.handlingTime.quantile(0.99)),
            server?.handlingTime.share(atMost: 0.010).map { String(format: "%.2f%%", $0 * 100) } ?? "-",
            perBoard(since(\.scores)), perBoard(since(\.names)), String(errors),
        ] + used.map(perRequest))
}

let columnWidths = [26, 11, 9, 7, 8, 8, 10, 10, 13, 12, 10, 6, 11, 11, 9, 12, 10]

func printRow(_ cells: [String]) {
    var line = ""
    for (index, cell) in cells.enumerated() {
        let width = columnWidths[index]
        let padding = String(repeating: " ", count: max(0, width - cell.count))
        line += index == 0 ? cell + padding : " " + padding + cell
    }
    print(line)
}

let centre = try await seedBoard()
let first = try await social.getLeaderboard(request, options: .onBehalf(of: centre))
progress(
    "the board: \(first.total) lines, week \(first.week.year)-W\(first.week.week), my rank \(first.myRank), top: "
        + first.entries.prefix(3).map { "\($0.rank). \($0.person.displayName) \($0.score.display)" }
        .joined(separator: ", "))
guard first.total == 101 else { throw SeedFailed(reason: "expected 101 lines, got \(first.total)") }
printRow([
    "workload", "concurrency", "requests", "req/s", "p50 ms", "p99 ms", "server p50", "server p99", "within 10 ms",
    "habits calls", "auth calls", "errors", "social µs", "habits µs", "auth µs", "Postgres µs", "client µs",
])
for concurrency in concurrencies {
    await measure(user: centre, concurrency: concurrency)
}
for concurrency in concurrencies {
    try await measureWithH2load(user: centre, concurrency: concurrency)
}
await socialChannel.close()
await habitsChannel.close()
await authChannel.close()
await pool.shutdown()
