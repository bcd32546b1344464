public import Foundation
internal import HabitFlowRPC
internal import Synchronization

/// How much history `habitflow-load seed` makes.
public struct SeedPlan: Sendable, Hashable {
    public var users = 1000
    /// Habits per account (the service allows 15 live ones).
    public var habitsPerUser = 15
    /// Days of history, ending today (1,825 = 5 years).
    public var days = 1825
    /// Share of days each habit is marked done.
    public var doneRatio = 0.6
    /// Calls in flight at once while adding entries.
    public var concurrency = 64
    /// Sign-ups in flight at once. Each costs auth a bcrypt hash (about a quarter second of a core at cost 12): more
    /// than the auth's cores can hash within the call deadline only makes calls time out while auth keeps hashing.
    public var signupConcurrency = 8
    public var connections = 4
    /// Seeds which days are done, so two seedings with the same plan make the same history.
    public var seed: UInt64 = 1

    public init() {}

    public func validate() throws(PlanError) {
        guard users >= 1 else { throw PlanError("--users must be at least 1") }
        guard (1...15).contains(habitsPerUser) else { throw PlanError("--habits must be 1 to 15 (the service's limit)") }
        guard days >= 0 else { throw PlanError("--days cannot be negative") }
        guard (0...1).contains(doneRatio) else { throw PlanError("--done-ratio must be between 0 and 1") }
        guard concurrency >= 1 else { throw PlanError("--concurrency must be at least 1") }
        guard signupConcurrency >= 1 else { throw PlanError("--signup-concurrency must be at least 1") }
        guard connections >= 1 else { throw PlanError("--connections must be at least 1") }
    }

    /// Whether habit `habit` of user `user` is done `daysAgo` days before today: a hash of the four numbers, so the
    /// history is the same every time and needs no memory.
    func isDone(user: Int, habit: Int, daysAgo: Int) -> Bool {
        var generator = SeededGenerator(
            seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(user) &* 0xBF58_476D_1CE4_E5B9 ^ UInt64(habit) &* 0x94D0_49BB_1331_11EB
                ^ UInt64(daysAgo))
        return Double(generator.next() >> 11) / Double(1 << 53) < doneRatio
    }

    /// Entries the plan makes (counted, not estimated).
    public var entryCount: Int {
        var count = 0
        for user in 0..<users {
            for habit in 0..<habitsPerUser {
                for day in 0..<days where isDone(user: user, habit: habit, daysAgo: day) { count += 1 }
            }
        }
        return count
    }
}

/// What a seeding made, and how fast.
public struct SeedResult: Sendable {
    public var accounts: [SeededAccount]
    public var accountsDuration: Duration
    public var habits: Int
    public var entries: Int
    public var entriesDuration: Duration
    /// Calls that failed after their retries, by status code.
    public var failures: [String: Int]
    public var stoppedEarly: Bool

    public var accountsPerSecond: Double { Double(accounts.count) / max(accountsDuration.seconds, 1e-9) }
    public var entriesPerSecond: Double { Double(entries) / max(entriesDuration.seconds, 1e-9) }
}

/// Bulk-loads history through the public RPCs: signs up `users` accounts (UTC) with `habitsPerUser` habits each,
/// then marks habits done on past days, `concurrency` calls at a time. Every create carries a client-chosen id, so
/// a retried call never makes a second entry.
public struct Seeder: Sendable {
    let api: HabitFlowAPI
    public let plan: SeedPlan
    let log: @Sendable (String) -> Void
    let stopper: LoadStopper

    public init(
        connector: HabitFlowConnector, callTimeout: Duration, plan: SeedPlan, stopper: LoadStopper = LoadStopper(),
        log: @escaping @Sendable (String) -> Void
    ) {
        self.api = HabitFlowAPI(connector: connector, callTimeout: callTimeout)
        self.plan = plan
        self.stopper = stopper
        self.log = log
    }

    public func run() async throws -> SeedResult {
        try plan.validate()
        let connections = try await openConnections()
        do {
            let result = try await seed(over: connections)
            for connection in connections { await connection.close() }
            return result
        } catch {
            for connection in connections { await connection.close() }
            throw error
        }
    }

    private func seed(over connections: [HabitFlowConnection]) async throws -> SeedResult {
        let clock = ContinuousClock()

        // Accounts and habits: signing up is bcrypt-bound (auth's threads), so this phase is slow per account.
        let started = clock.now
        let created = SharedCounter(0)
        let ticker = startTicker { "seed: \(created.fetchAndAdd(0))/\(plan.users) accounts" }
        let users = await boundedConcurrentMap(count: plan.users, concurrency: plan.signupConcurrency) {
            index -> Result<SeededUser, any Error> in
            let connection = connections[index % connections.count]
            do {
                let tag = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
                let email = "seed-\(tag)@example.com"
                let password = "seed-\(tag)-password"
                let session = try await retrying {
                    try await api.register(
                        email: email, username: "seed_\(tag)", password: password, device: UUID().uuidString.lowercased(),
                        on: connection)
                }
                let habits = try await retrying {
                    try await api.createHabits(plan.habitsPerUser, for: session, on: connection)
                }
                _ = created.fetchAndAdd(1)
                let account = SeededAccount(
                    email: email, password: password, userID: session.userID.uuidString.lowercased(),
                    refreshToken: session.refreshToken)
                return .success(SeededUser(account: account, session: session, habits: habits))
            } catch {
                return .failure(error)
            }
        }
        ticker.cancel()
        let seeded = try users.map { try $0.get() }
        let accountsDuration = clock.now - started
        log(
            "seed: \(seeded.count) accounts with \(plan.habitsPerUser) habits each in \(formatSeconds(accountsDuration)) "
                + "(\(String(format: "%.1f", Double(seeded.count) / max(accountsDuration.seconds, 1e-9))) accounts/s)")

        // Entries: user by user, habit by habit, day by day, skipping the days the plan leaves undone.
        let entriesStarted = clock.now
        let days = (0..<plan.days).map { LocalDay.today(minus: $0) }
        let cursor = EntryCursor(plan: plan)
        let written = SharedCounter(0)
        let failures = FailureCounts()
        let entryTicker = startTicker {
            let count = written.fetchAndAdd(0)
            let rate = Double(count) / max((clock.now - entriesStarted).seconds, 1e-9)
            return "seed: \(count) entries (\(String(format: "%.0f", rate))/s)"
        }
        let stopper = stopper
        await withDiscardingTaskGroup { group in
            for _ in 0..<plan.concurrency {
                group.addTask {
                    while !stopper.isStopped, let job = cursor.next() {
                        let user = seeded[job.user]
                        do {
                            try await retrying {
                                try await api.markDone(
                                    habit: user.habits[job.habit], on: days[job.daysAgo], for: user.session,
                                    connection: connections[job.user % connections.count])
                            }
                            _ = written.fetchAndAdd(1)
                        } catch {
                            failures.add(failureCode(of: error).code)
                        }
                    }
                }
            }
        }
        entryTicker.cancel()
        return SeedResult(
            accounts: seeded.map(\.account), accountsDuration: accountsDuration, habits: seeded.count * plan.habitsPerUser,
            entries: written.fetchAndAdd(0), entriesDuration: clock.now - entriesStarted,
            failures: failures.counts, stoppedEarly: stopper.isStopped)
    }

    private func openConnections() async throws -> [HabitFlowConnection] {
        var connections: [HabitFlowConnection] = []
        do {
            for _ in 0..<plan.connections { connections.append(try await api.connector.open()) }
        } catch {
            for connection in connections { await connection.close() }
            throw error
        }
        return connections
    }

    /// Logs `line()` once a second until cancelled.
    private func startTicker(_ line: @escaping @Sendable () -> String) -> Task<Void, Never> {
        let log = log
        return Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if !Task.isCancelled { log(line()) }
            }
        }
    }
}

/// Failed calls by status code, counted from many tasks.
final class FailureCounts: Sendable {
    private let state = Mutex<[String: Int]>([:])

    func add(_ code: String) { state.withLock { $0[code, default: 0] += 1 } }
    var counts: [String: Int] { state.withLock { $0 } }
}

/// An account made by the seeder, signed in, with its habits.
struct SeededUser: Sendable {
    var account: SeededAccount
    var session: HabitFlowSession
    var habits: [String]
}

/// Retries a call that failed for a passing reason (overload, a restart) up to 3 times, 100 ms, 200 ms, 400 ms
/// apart. Safe for seeding: every create carries its own id.
func retrying<Value>(_ body: () async throws -> Value) async throws -> Value {
    var delay = Duration.milliseconds(100)
    for _ in 0..<3 {
        do {
            return try await body()
        } catch let error as RPCError
            where [.unavailable, .deadlineExceeded, .resourceExhausted, .aborted].contains(error.code)
        {
            try await Task.sleep(for: delay)
            delay *= 2
        }
    }
    return try await body()
}

/// Walks (user, habit, day) in order, handing out the done ones to the seeding tasks.
final class EntryCursor: Sendable {
    struct Job {
        var user: Int
        var habit: Int
        var daysAgo: Int
    }

    private let plan: SeedPlan
    private let position = Mutex<Job>(Job(user: 0, habit: 0, daysAgo: 0))

    init(plan: SeedPlan) { self.plan = plan }

    func next() -> Job? {
        position.withLock { position in
            while position.user < plan.users {
                let job = position
                position.daysAgo += 1
                if position.daysAgo >= plan.days {
                    position.daysAgo = 0
                    position.habit += 1
                    if position.habit >= plan.habitsPerUser {
                        position.habit = 0
                        position.user += 1
                    }
                }
                if job.daysAgo < plan.days, plan.isDone(user: job.user, habit: job.habit, daysAgo: job.daysAgo) {
                    return job
                }
            }
            return nil
        }
    }
}
