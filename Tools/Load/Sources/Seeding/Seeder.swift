internal import HabitFlowInternalCredential
internal import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import HabitFlowLocking
internal import HabitFlowCrypto

/// How the seeder writes entries.
public enum SeedEntryPath: String, Sendable, Hashable, CaseIterable {
    /// `HabitsInternal/ImportEntries`: one user's entries in batches, one transaction each (straight to habits).
    case importEntries = "import"
    /// `HabitsService/MarkHabitDone`, one call per entry, on the seeding route (the gateway or straight to habits).
    case markDone = "mark-done"
}

/// How much history `habitflow-load seed` makes.
public struct SeedPlan: Sendable, Hashable {
    public var users = 1000
    /// Habits per account (the service allows 15 live ones).
    public var habitsPerUser = 15
    /// Days of history, ending today (1,825 = 5 years).
    public var days = 1825
    /// Share of days each habit is marked done.
    public var doneRatio = 0.6
    public var entryPath = SeedEntryPath.importEntries
    /// Calls in flight at once while adding entries: a few import batches keep Postgres busy (each is thousands of
    /// rows); one-entry MarkHabitDone calls need many (``defaultConcurrency(for:)``).
    public var concurrency = SeedPlan.defaultConcurrency(for: .importEntries)
    /// Entries per ImportEntries call (the service takes at most 10,000).
    public var batchSize = 10_000
    /// Sign-ups in flight at once. Each costs auth a bcrypt hash (about a quarter second of a core at cost 12): more
    /// than the auth's cores can hash within the call deadline only makes calls time out while auth keeps hashing.
    public var signupConcurrency = 8
    public var connections = 4
    /// Seeds which days are done, so two seedings with the same plan make the same history.
    public var seed: UInt64 = 1

    public init() {}

    public static func defaultConcurrency(for path: SeedEntryPath) -> Int {
        switch path {
        case .importEntries: 4
        case .markDone: 64
        }
    }

    public func validate() throws(PlanError) {
        guard users >= 1 else { throw PlanError("--users must be at least 1") }
        guard (1...15).contains(habitsPerUser) else { throw PlanError("--habits must be 1 to 15 (the service's limit)") }
        guard days >= 0 else { throw PlanError("--days cannot be negative") }
        guard (0...1).contains(doneRatio) else { throw PlanError("--done-ratio must be between 0 and 1") }
        guard concurrency >= 1 else { throw PlanError("--concurrency must be at least 1") }
        guard signupConcurrency >= 1 else { throw PlanError("--signup-concurrency must be at least 1") }
        guard connections >= 1 else { throw PlanError("--connections must be at least 1") }
        guard (1...10_000).contains(batchSize) else {
            throw PlanError("--batch-size must be 1 to 10000 (the service's limit)")
        }
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

/// Where the seeder sends `HabitsInternal/ImportEntries`: the habits service itself (the gateway never routes
/// internal services), signed with the internal credential.
public struct EntryImportRoute: Sendable {
    public var habits: RPCTarget
    public var internalSecret: String

    /// The caller name the seeder signs as (internal RPCs refuse calls signed as the gateway).
    static let caller = "habitflow-load"

    public init(habits: RPCTarget, internalSecret: String) {
        self.habits = habits
        self.internalSecret = internalSecret
    }
}

/// Bulk-loads history: signs up `users` accounts (UTC) through auth and creates `habitsPerUser` habits each through
/// the public API (the real paths), then writes their past entries, `concurrency` calls at a time: in batches of a
/// user's entries through `HabitsInternal/ImportEntries` (the default), or one MarkHabitDone call per entry. Every
/// create carries a client-chosen id, so a retried call never makes a second entry.
public struct Seeder: Sendable {
    let api: HabitFlowAPI
    public let plan: SeedPlan
    let importRoute: EntryImportRoute?
    let log: @Sendable (String) -> Void
    let stopper: LoadStopper

    /// `importRoute` is required when the plan imports entries.
    public init(
        connector: HabitFlowConnector, importRoute: EntryImportRoute? = nil, callTimeout: Duration, plan: SeedPlan,
        stopper: LoadStopper = LoadStopper(), log: @escaping @Sendable (String) -> Void
    ) {
        self.api = HabitFlowAPI(connector: connector, callTimeout: callTimeout)
        self.plan = plan
        self.importRoute = importRoute
        self.stopper = stopper
        self.log = log
    }

    public func run() async throws -> SeedResult {
        try plan.validate()
        if plan.entryPath == .importEntries, importRoute == nil {
            throw PlanError("importing entries needs the habits service's address and the internal secret")
        }
        let connections = try await openConnections()
        var importChannels: [RPCChannel] = []
        func closeAll() async {
            for connection in connections { await connection.close() }
            for channel in importChannels { await channel.close() }
        }
        do {
            if plan.entryPath == .importEntries, let importRoute {
                importChannels = try await openImportChannels(importRoute)
            }
            let result = try await seed(over: connections, importChannels: importChannels)
            await closeAll()
            return result
        } catch {
            await closeAll()
            throw error
        }
    }

    private func seed(
        over connections: [HabitFlowConnection], importChannels: [RPCChannel]
    ) async throws -> SeedResult {
        let clock = ContinuousClock()

        // Accounts and habits: signing up is bcrypt-bound (auth's threads), so this phase is slow per account.
        let started = clock.now
        let created = SharedCounter(0)
        let ticker = startTicker { "seed: \(created.fetchAndAdd(0))/\(plan.users) accounts" }
        let users = await boundedConcurrentMap(count: plan.users, concurrency: plan.signupConcurrency) {
            index -> Result<SeededUser, any Error> in
            let connection = connections[index % connections.count]
            do {
                let tag = UUID.random().lowercasedString.replacingOccurrences(of: "-", with: "").prefix(16)
                let email = "seed-\(tag)@example.com"
                let password = "seed-\(tag)-password"
                let session = try await retrying {
                    try await api.register(
                        email: email, username: "seed_\(tag)", password: password, device: UUID.random().lowercasedString,
                        on: connection)
                }
                let habits = try await retrying {
                    try await api.createHabits(plan.habitsPerUser, for: session, on: connection)
                }
                _ = created.fetchAndAdd(1)
                let account = SeededAccount(
                    email: email, password: password, userID: session.userID.lowercasedString.lowercased(),
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

        let entriesStarted = clock.now
        let written = SharedCounter(0)
        let failures = FailureCounts()
        let entryTicker = startTicker {
            let count = written.fetchAndAdd(0)
            let rate = Double(count) / max((clock.now - entriesStarted).seconds, 1e-9)
            return "seed: \(count) entries (\(String(format: "%.0f", rate))/s)"
        }
        let days = (0..<plan.days).map { LocalDay.today(minus: $0) }
        switch plan.entryPath {
        case .importEntries:
            await importEntries(of: seeded, days: days, over: importChannels, written: written, failures: failures)
        case .markDone:
            await markEntriesDone(of: seeded, days: days, over: connections, written: written, failures: failures)
        }
        entryTicker.cancel()
        return SeedResult(
            accounts: seeded.map(\.account), accountsDuration: accountsDuration, habits: seeded.count * plan.habitsPerUser,
            entries: written.fetchAndAdd(0), entriesDuration: clock.now - entriesStarted,
            failures: failures.counts, stoppedEarly: stopper.isStopped)
    }

    /// Each task takes the next user, makes all of that user's entries, and sends them in batches of
    /// `plan.batchSize`, one after the other (a user's writes serialize in the service anyway). A batch keeps its
    /// entry ids across retries, so a retry of a batch that did commit adds nothing.
    private func importEntries(
        of seeded: [SeededUser], days: [LocalDay], over channels: [RPCChannel], written: SharedCounter,
        failures: FailureCounts
    ) async {
        let dates = days.map(\.proto)
        let nextUser = SharedCounter(0)
        let options = CallOptions(timeout: api.callTimeout)
        let plan = plan
        let stopper = stopper
        await withDiscardingTaskGroup { group in
            for worker in 0..<plan.concurrency {
                let client = Habitflow_Habits_V1_HabitsInternal.Client(transport: channels[worker % channels.count])
                group.addTask {
                    while !stopper.isStopped {
                        let index = nextUser.fetchAndAdd(1)
                        guard index < seeded.count else { return }
                        let user = seeded[index]
                        let entries = plan.importedEntries(user: index, habits: user.habits, dates: dates)
                        for start in stride(from: 0, to: entries.count, by: plan.batchSize) where !stopper.isStopped {
                            let request = Habitflow_Habits_V1_ImportEntriesRequest.with {
                                $0.userID = user.account.userID
                                $0.entries = Array(entries[start..<min(start + plan.batchSize, entries.count)])
                            }
                            do {
                                let response = try await retrying {
                                    try await client.importEntries(request, options: options)
                                }
                                _ = written.fetchAndAdd(Int(response.importedEntries + response.existingEntries))
                            } catch {
                                failures.add(failureCode(of: error).code, count: request.entries.count)
                            }
                        }
                    }
                }
            }
        }
    }

    /// User by user, habit by habit, day by day, skipping the days the plan leaves undone: one call per entry.
    private func markEntriesDone(
        of seeded: [SeededUser], days: [LocalDay], over connections: [HabitFlowConnection], written: SharedCounter,
        failures: FailureCounts
    ) async {
        let cursor = EntryCursor(plan: plan)
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
    }

    /// One channel per `plan.connections` to the habits service, signed as ``EntryImportRoute/caller``.
    private func openImportChannels(_ route: EntryImportRoute) async throws -> [RPCChannel] {
        let signer = InternalCredentialClientInterceptor(
            credential: InternalCredential(secret: route.internalSecret), caller: EntryImportRoute.caller)
        let connector = RPCConnector(
            target: route.habits, connectTimeout: api.connector.connectTimeout, logger: api.connector.logger,
            interceptors: [signer])
        var channels: [RPCChannel] = []
        do {
            for _ in 0..<plan.connections { channels.append(try await connector.open()) }
        } catch {
            for channel in channels { await channel.close() }
            throw error
        }
        return channels
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
    private let state = Locked<[String: Int]>([:])

    func add(_ code: String, count: Int = 1) { state.withLock { $0[code, default: 0] += count } }
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

extension SeedPlan {
    /// The entries of user `user` (habit by habit, oldest day first), each with a new id, for ImportEntries.
    /// `dates[daysAgo]` is the day `daysAgo` days before today.
    func importedEntries(user: Int, habits: [String], dates: [Habitflow_Habits_V1_LocalDate])
        -> [Habitflow_Habits_V1_ImportedEntry]
    {
        var entries: [Habitflow_Habits_V1_ImportedEntry] = []
        entries.reserveCapacity(Int(Double(habits.count * dates.count) * doneRatio * 1.1))
        for (habit, habitID) in habits.enumerated() {
            for daysAgo in dates.indices.reversed() where isDone(user: user, habit: habit, daysAgo: daysAgo) {
                var entry = Habitflow_Habits_V1_ImportedEntry()
                entry.entryID = UUID.random().lowercasedString
                entry.habitID = habitID
                entry.date = dates[daysAgo]
                entries.append(entry)
            }
        }
        return entries
    }
}

/// Walks (user, habit, day) in order, handing out the done ones to the seeding tasks.
final class EntryCursor: Sendable {
    struct Job {
        var user: Int
        var habit: Int
        var daysAgo: Int
    }

    private let plan: SeedPlan
    private let position = Locked<Job>(Job(user: 0, habit: 0, daysAgo: 0))

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
