internal import HabitFlowRPC
internal import Synchronization

/// Lets a run be stopped early (Ctrl-C): no new request is sent, those in flight finish, and the result covers what
/// was measured until then.
public final class LoadStopper: Sendable {
    private let stopped = Atomic<Bool>(false)

    public init() {}

    public func stop() { stopped.store(true, ordering: .relaxed) }
    public var isStopped: Bool { stopped.load(ordering: .relaxed) }
}

/// An integer shared by tasks (an `Atomic` itself cannot be captured by their closures).
final class SharedCounter: Sendable {
    private let value: Atomic<Int>

    init(_ initial: Int) { value = Atomic(initial) }

    /// Adds `delta` and returns the value before.
    func fetchAndAdd(_ delta: Int) -> Int { value.wrappingAdd(delta, ordering: .relaxed).oldValue }
}

/// Why a run could not start.
public enum LoadFailure: Error, CustomStringConvertible {
    /// A connection to the target could not be opened.
    case connect(index: Int, error: any Error)
    /// A virtual user could not be prepared (sign-up, login...).
    case prepareUser(index: Int, error: any Error)
    case plan(PlanError)
    case mix(MixError)

    public var description: String {
        switch self {
        case .connect(let index, let error): "connection \(index + 1) could not be opened: \(error)"
        case .prepareUser(let index, let error): "virtual user \(index + 1) could not be prepared: \(error)"
        case .plan(let error): error.description
        case .mix(let error): error.description
        }
    }
}

/// Runs a ``LoadScenario`` by a ``LoadPlan``: opens the connections, prepares the users, applies the load (closed or
/// open loop) with a progress report once a second, and returns what it measured.
public struct LoadEngine<Scenario: LoadScenario>: Sendable {
    public let scenario: Scenario
    public let plan: LoadPlan
    /// Receives one report a second while the load runs.
    public let progress: @Sendable (IntervalReport) -> Void
    /// Told what the engine does before the load starts (connecting, preparing users).
    public let log: @Sendable (String) -> Void
    /// Told when the measured window starts and ends (after the warm-up; the end of ``LoadPlan/duration``, or when
    /// the load stops): what a harness measuring the target's CPU over the same window needs.
    public let window: @Sendable (MeasuredWindow) -> Void
    public let stopper: LoadStopper

    public enum MeasuredWindow: String, Sendable {
        case started
        case ended
    }

    public init(
        scenario: Scenario, plan: LoadPlan, stopper: LoadStopper = LoadStopper(),
        log: @escaping @Sendable (String) -> Void = { _ in },
        window: @escaping @Sendable (MeasuredWindow) -> Void = { _ in },
        progress: @escaping @Sendable (IntervalReport) -> Void = { _ in }
    ) {
        self.scenario = scenario
        self.plan = plan
        self.stopper = stopper
        self.log = log
        self.window = window
        self.progress = progress
    }

    public func run() async throws(LoadFailure) -> LoadMeasurement {
        do throws(PlanError) { try plan.validate() } catch { throw .plan(error) }
        let operationIndices: [Int]
        do throws(MixError) {
            operationIndices = try plan.mix.resolve(against: scenario.operationNames, scenario: scenario.name)
        } catch { throw .mix(error) }

        let clock = ContinuousClock()
        var started = clock.now
        let connections = try await openConnections()
        log("opened \(connections.count) connection\(connections.count == 1 ? "" : "s") in \(formatSeconds(clock.now - started))")

        let users: [Scenario.User]
        do throws(LoadFailure) {
            started = clock.now
            users = try await prepareUsers(connections: connections)
            log("prepared \(users.count) user\(users.count == 1 ? "" : "s") in \(formatSeconds(clock.now - started))")
        } catch {
            await closeAll(connections)
            throw error
        }

        let measurement = await applyLoad(
            connections: connections, users: users, operationIndices: operationIndices, clock: clock)
        do {
            try await scenario.finish(users: measurement.users)
        } catch {
            log("saving the users' state failed: \(error)")
        }
        await closeAll(connections)
        return measurement.result
    }

    // MARK: Before the load

    private func openConnections() async throws(LoadFailure) -> [Scenario.Connection] {
        let scenario = scenario
        let opened = await boundedConcurrentMap(count: plan.connections, concurrency: plan.connectConcurrency) {
            index -> Result<Scenario.Connection, any Error> in
            do { return .success(try await scenario.openConnection(index: index)) } catch { return .failure(error) }
        }
        var connections: [Scenario.Connection] = []
        var firstFailure: (Int, any Error)?
        for (index, result) in opened.enumerated() {
            switch result {
            case .success(let connection): connections.append(connection)
            case .failure(let error): if firstFailure == nil { firstFailure = (index, error) }
            }
        }
        if let (index, error) = firstFailure {
            await closeAll(connections)
            throw .connect(index: index, error: error)
        }
        return connections
    }

    private func prepareUsers(connections: [Scenario.Connection]) async throws(LoadFailure) -> [Scenario.User] {
        let scenario = scenario
        let prepared = await boundedConcurrentMap(count: plan.users, concurrency: plan.setupConcurrency) {
            index -> Result<Scenario.User, any Error> in
            do {
                return .success(
                    try await scenario.prepareUser(index: index, connection: connections[index % connections.count]))
            } catch {
                return .failure(error)
            }
        }
        var users: [Scenario.User] = []
        for (index, result) in prepared.enumerated() {
            switch result {
            case .success(let user): users.append(user)
            case .failure(let error): throw .prepareUser(index: index, error: error)
            }
        }
        return users
    }

    private func closeAll(_ connections: [Scenario.Connection]) async {
        let scenario = scenario
        await withDiscardingTaskGroup { group in
            for connection in connections {
                group.addTask { await scenario.closeConnection(connection) }
            }
        }
    }

    // MARK: The load

    private struct LoadOutcome {
        var result: LoadMeasurement
        var users: [Scenario.User]
    }

    private func applyLoad(
        connections: [Scenario.Connection], users: [Scenario.User], operationIndices: [Int], clock: ContinuousClock
    ) async -> LoadOutcome {
        let lanes = connections.map { Lane(connection: $0, streams: plan.streamsPerConnection) }
        let loadStart = clock.now
        let measureStart = loadStart + plan.warmUp
        let recorder = LoadRecorder(operationCount: operationIndices.count, start: loadStart)
        let context = RunContext(
            scenario: scenario, lanes: lanes, recorder: recorder, operationIndices: operationIndices, mix: plan.mix,
            measureStart: measureStart, measureEnd: plan.duration.map { measureStart + $0 }, stopper: stopper)

        // Reports the window's start and planned end, and says which it reported.
        let reportWindow = window
        let windowTimer = Task { [duration = plan.duration] () -> (started: Bool, ended: Bool) in
            try? await clock.sleep(until: measureStart)
            guard !Task.isCancelled else { return (false, false) }
            reportWindow(.started)
            guard let duration else { return (true, false) }
            try? await clock.sleep(until: measureStart + duration)
            guard !Task.isCancelled else { return (true, false) }
            reportWindow(.ended)
            return (true, true)
        }
        let ticker = Task {
            var tick = 1
            while !Task.isCancelled {
                try? await clock.sleep(until: loadStart + .seconds(tick))
                if Task.isCancelled { break }
                let now = clock.now
                progress(recorder.takeInterval(now: now, loadStart: loadStart, measureStart: measureStart))
                tick += 1
            }
        }

        let finalUsers: [Scenario.User]
        switch plan.pacing {
        case .closedLoop:
            finalUsers = await runClosedLoop(users: users, context: context)
        case .openLoop(let rate):
            finalUsers = await runOpenLoop(
                users: users, schedule: OpenLoopSchedule(ratePerSecond: rate), loadStart: loadStart, context: context)
        }
        ticker.cancel()
        windowTimer.cancel()
        // A window that ended before its planned end (a request count, a stop) ends here.
        let reported = await windowTimer.value
        if reported.started, !reported.ended { window(.ended) }
        let end = clock.now
        let (tallies, lastCompletion) = recorder.finish()
        // The measured window runs until the last measured response (or the planned end, if that is later), so
        // a server that falls behind shows a lower achieved rate.
        var window = (lastCompletion ?? end) - measureStart
        if let duration = plan.duration, !stopper.isStopped { window = max(window, duration) }
        let result = LoadMeasurement(
            plan: plan, scenario: scenario.name, operations: zip(plan.mix.entries, tallies).map { entry, tally in
                LoadMeasurement.Operation(name: entry.operation, weight: entry.weight, tally: tally)
            }, measuredDuration: max(window, .zero), stoppedEarly: stopper.isStopped)
        return LoadOutcome(result: result, users: finalUsers)
    }

    /// Each user sends its next request when its previous one ended, until the duration or request budget is spent.
    private func runClosedLoop(users: [Scenario.User], context: RunContext) async -> [Scenario.User] {
        let measuredBudget = plan.requests.map { SharedCounter($0) }
        let nextLane = SharedCounter(0)
        let seed = plan.seed
        return await withTaskGroup(of: Scenario.User.self) { group in
            for (index, user) in users.enumerated() {
                group.addTask {
                    var user = user
                    var generator = SeededGenerator(seed: seed &+ UInt64(index) &* 0x9E37_79B9)
                    let clock = ContinuousClock()
                    while !context.stopper.isStopped {
                        let intended = clock.now
                        if let end = context.measureEnd, intended >= end { break }
                        let measured = intended >= context.measureStart
                        if measured, let budget = measuredBudget {
                            // Take one request from the budget; none left ends this user.
                            guard budget.fetchAndAdd(-1) > 0 else { break }
                        }
                        let entry = context.mix.pick(using: &generator)
                        let lane = context.lanes[nextLane.fetchAndAdd(1) % context.lanes.count]
                        await context.send(entry: entry, user: &user, lane: lane, intended: intended, measured: measured)
                    }
                    return user
                }
            }
            var finished: [Scenario.User] = []
            for await user in group { finished.append(user) }
            return finished
        }
    }

    /// Sends request `k` at `loadStart + k / rate`, each with an idle user; a request that cannot go on time (no
    /// idle user, no free stream) goes as soon as it can, and its latency still counts from its intended time.
    private func runOpenLoop(
        users: [Scenario.User], schedule: OpenLoopSchedule, loadStart: ContinuousClock.Instant, context: RunContext
    ) async -> [Scenario.User] {
        let idleUsers = AsyncPool(users)
        let warmUpRequests = schedule.requestCount(in: plan.warmUp)
        let lastRequest: Int? = plan.requests.map { warmUpRequests + $0 }
        var generator = SeededGenerator(seed: plan.seed)
        let clock = ContinuousClock()
        await withDiscardingTaskGroup { group in
            var index = 0
            while !context.stopper.isStopped {
                if let lastRequest, index >= lastRequest { break }
                let intended = loadStart + schedule.intendedOffset(ofRequest: index)
                if let end = context.measureEnd, intended >= end { break }
                if intended > clock.now { try? await clock.sleep(until: intended, tolerance: .microseconds(50)) }
                let idleUser = await idleUsers.take()
                let entry = context.mix.pick(using: &generator)
                let lane = context.lanes[index % context.lanes.count]
                let measured = index >= warmUpRequests
                group.addTask {
                    var user = idleUser
                    await context.send(entry: entry, user: &user, lane: lane, intended: intended, measured: measured)
                    idleUsers.put(user)
                }
                index += 1
            }
        }
        return idleUsers.drain()
    }

    /// One connection with its free stream slots.
    private struct Lane: Sendable {
        let connection: Scenario.Connection
        let streams: AsyncPool<Void>

        init(connection: Scenario.Connection, streams: Int) {
            self.connection = connection
            self.streams = AsyncPool(Array(repeating: (), count: streams))
        }
    }

    /// What every request task needs.
    private struct RunContext: Sendable {
        let scenario: Scenario
        let lanes: [Lane]
        let recorder: LoadRecorder
        let operationIndices: [Int]
        let mix: OperationMix
        let measureStart: ContinuousClock.Instant
        let measureEnd: ContinuousClock.Instant?
        let stopper: LoadStopper

        /// Sends one request on `lane` once it has a free stream, and records it against its intended time.
        func send(
            entry: Int, user: inout Scenario.User, lane: Lane, intended: ContinuousClock.Instant, measured: Bool
        ) async {
            let clock = ContinuousClock()
            await lane.streams.take()
            let sent = clock.now
            do {
                try await scenario.perform(operation: operationIndices[entry], user: &user, connection: lane.connection)
                let now = clock.now
                lane.streams.put(())
                recorder.recordSuccess(
                    operation: entry, latency: now - intended, serviceTime: now - sent, measured: measured, at: now)
            } catch {
                let now = clock.now
                lane.streams.put(())
                let (code, message) = failureCode(of: error)
                recorder.recordFailure(operation: entry, code: code, message: message, measured: measured, at: now)
            }
        }
    }
}

/// The status code name an error is counted under, and its message.
func failureCode(of error: any Error) -> (code: String, message: String) {
    switch error {
    case let error as RPCError: ("\(error.code)", error.message)
    case is CancellationError: ("CANCELLED", "the request was cancelled")
    case let error as ResponseCheckFailure: ("CLIENT_CHECK", error.description)
    default: ("CLIENT_ERROR", "\(error)")
    }
}

/// Runs `body` for `0..<count` with at most `concurrency` at once; results in index order.
func boundedConcurrentMap<Value: Sendable>(
    count: Int, concurrency: Int, _ body: @escaping @Sendable (Int) async -> Value
) async -> [Value] {
    await withTaskGroup(of: (Int, Value).self) { group in
        var results = [Value?](repeating: nil, count: count)
        var next = 0
        while next < min(concurrency, count) {
            let index = next
            group.addTask { (index, await body(index)) }
            next += 1
        }
        for await (index, value) in group {
            results[index] = value
            if next < count {
                let index = next
                group.addTask { (index, await body(index)) }
                next += 1
            }
        }
        return results.compactMap { $0 }
    }
}

func formatSeconds(_ duration: Duration) -> String {
    String(format: "%.1f s", duration.seconds)
}
