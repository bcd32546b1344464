internal import ArgumentParser
internal import Foundation
internal import Logging

/// `habitflow-load run`: applies load and reports latency percentiles, errors and throughput.
struct RunCommand: LoadSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Applies load to the target and reports latency percentiles, errors and throughput.",
        discussion: """
            Without --rate the load is a closed loop: each user sends its next request as soon as the previous one \
            ended. With --rate it is an open loop: requests go out on a fixed schedule and each one's latency \
            counts from its intended send time, so a server that stalls shows up in the percentiles \
            (coordinated omission corrected, as wrk2 does).

            Examples:
              habitflow-load run --scenario mixed --users 1000 --connections 50 --rate 1000 --duration 30s \\
                  --warm-up 5s --max-p99 mark-done:10ms --json result.json --svg latency.svg
              habitflow-load run --scenario interop --target 127.0.0.1:50051 --users 64 --requests 100000
            """)

    @OptionGroup var endpoint: ConnectionOptions

    @Option(name: .shortAndLong, help: "The scenario (see `habitflow-load scenarios`).")
    var scenario = "mixed"

    @Option(help: ArgumentHelp("Accounts file of `habitflow-load seed`: users resume these accounts instead of signing up.", valueName: "path"))
    var accounts: String?

    @Option(help: "Payload bytes of each UnaryCall (scenario interop).")
    var payloadSize = 16

    @OptionGroup var load: LoadOptions
    @OptionGroup var thresholds: ThresholdOptions

    @Option(help: ArgumentHelp("Writes the result as JSON to this file.", valueName: "path"))
    var json: String?

    @Option(help: ArgumentHelp("Writes an SVG latency-by-percentile plot to this file.", valueName: "path"))
    var svg: String?

    @Option(
        help: ArgumentHelp(
            "Records every call of the load (warm-up included) to this file, one tab-separated line each: unix ms, operation, OK or status, user id, id the client chose for what it wrote, detail (HabitFlow scenarios).",
            valueName: "path"))
    var ledger: String?

    @Option(
        help: ArgumentHelp(
            "Writes `started` to this file when the measured window starts (after the warm-up), `ended` when it ends: for a harness measuring the target over the same window.",
            valueName: "path"))
    var windowFile: String?

    @Flag(help: "No progress line every second.")
    var quiet = false

    func validate() throws {
        guard payloadSize >= 0 else { throw ValidationError("--payload-size cannot be negative") }
    }

    func execute(output: LoadOutput, stopper: LoadStopper) async -> Int32 {
        var settings = endpoint.scenarioSettings()
        settings.accountsFile = accounts
        settings.payloadSize = payloadSize
        let scenario: any LoadScenario
        do {
            if let ledger {
                guard self.scenario != "interop" else { throw OptionError("--ledger is for the HabitFlow scenarios") }
                settings.ledger = try LoadLedger(path: ledger)
            }
            scenario = try ScenarioCatalog.make(self.scenario, settings: settings)
        } catch {
            output.diagnostics("habitflow-load: \(error)")
            return LoadExitCode.usage
        }
        defer { settings.ledger?.close() }
        return await run(
            scenario, target: settings.targetDescription, ledger: settings.ledger, output: output, stopper: stopper)
    }

    private func run<Scenario: LoadScenario>(
        _ scenario: Scenario, target: String, ledger: LoadLedger?, output: LoadOutput, stopper: LoadStopper
    ) async -> Int32 {
        let plan: LoadPlan
        let thresholds: [Threshold]
        do {
            plan = try load.plan(defaultMix: scenario.defaultMix)
            try plan.validate()
            _ = try plan.mix.resolve(against: scenario.operationNames, scenario: scenario.name)
            thresholds = try self.thresholds.all(operationsInMix: plan.mix.entries.map(\.operation))
        } catch {
            output.diagnostics("habitflow-load: \(error)")
            return LoadExitCode.usage
        }

        let startedAt = Date()
        output.diagnostics("habitflow-load: " + SummaryText.headline(plan: plan, scenario: scenario.name, target: target))
        let quiet = quiet
        let engine = LoadEngine(
            scenario: scenario, plan: plan, stopper: stopper, log: { output.diagnostics("habitflow-load: \($0)") },
            window: { [windowFile] phase in
                guard let windowFile else { return }
                do {
                    try Data((phase.rawValue + "\n").utf8).write(to: URL(fileURLWithPath: windowFile), options: .atomic)
                } catch {
                    output.diagnostics("habitflow-load: could not write \(windowFile): \(error)")
                }
            },
            progress: { report in
                // Once a second: a run that is killed leaves a ledger at most a second short.
                ledger?.flush()
                if !quiet { output.diagnostics(SummaryText.progressLine(report)) }
            })
        let measurement: LoadMeasurement
        do throws(LoadFailure) {
            measurement = try await engine.run()
        } catch {
            output.diagnostics("habitflow-load: \(explain(error))")
            return LoadExitCode.runFailed
        }

        let outcomes = thresholds.map { $0.evaluate(measurement) }
        output.standard(SummaryText.render(measurement, target: target, outcomes: outcomes))
        do {
            if let json {
                let report = LoadReport(
                    measurement: measurement, target: target, startedAt: startedAt, outcomes: outcomes)
                try report.encoded().write(to: URL(fileURLWithPath: json))
                output.diagnostics("habitflow-load: wrote \(json)")
            }
            if let svg {
                try PercentilePlot.svg(for: measurement, target: target, outcomes: outcomes)
                    .write(toFile: svg, atomically: true, encoding: .utf8)
                output.diagnostics("habitflow-load: wrote \(svg)")
            }
        } catch {
            output.diagnostics("habitflow-load: cannot write the result: \(error.localizedDescription)")
            return LoadExitCode.runFailed
        }
        if measurement.total.succeeded == 0 {
            output.diagnostics(
                "habitflow-load: no request succeeded; is \(target) the right target for scenario "
                    + "'\(scenario.name)'?")
            return LoadExitCode.runFailed
        }
        return outcomes.allSatisfy(\.passed) ? LoadExitCode.success : LoadExitCode.thresholdMissed
    }

    /// The failure with a hint at what to do.
    private func explain(_ failure: LoadFailure) -> String {
        if case .connect(_, let error) = failure, let unreachable = error as? TargetUnreachable {
            return "\(unreachable)\n  is the target running? The gateway listens on 127.0.0.1:7070 once "
                + "`scripts/stack` started it; --target HOST:PORT picks another."
        }
        return failure.description
    }
}

/// Where to connect (the gateway, or the services directly) and how long calls may take.
struct ConnectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp("The server: the gateway, or an interop server for --scenario interop.", valueName: "host:port"),
        transform: { try RPCTarget(parsing: $0) })
    var target = RPCTarget.gatewayDefault

    @Option(help: ArgumentHelp("Deadline of each call.", valueName: "duration"), transform: secondsOrDuration)
    var timeout: Duration = .seconds(10)

    @Option(help: ArgumentHelp("How long opening one connection may take.", valueName: "duration"), transform: secondsOrDuration)
    var connectTimeout: Duration = .seconds(5)

    @Option(
        help: ArgumentHelp(
            "Auth service address: with --direct-habits, calls go straight to the services, signed with the internal credential, instead of through the gateway.",
            valueName: "host:port"),
        transform: { try RPCTarget(parsing: $0) })
    var directAuth: RPCTarget?

    @Option(help: ArgumentHelp("Habits service address (see --direct-auth).", valueName: "host:port"), transform: { try RPCTarget(parsing: $0) })
    var directHabits: RPCTarget?

    @Option(help: ArgumentHelp("Internal credential secret for --direct-* (default: $HABITFLOW_INTERNAL_SECRET, else the local stack's).", valueName: "secret"))
    var internalSecret = ProcessInfo.processInfo.environment["HABITFLOW_INTERNAL_SECRET"] ?? "habitflow-local-development-secret"

    @Flag(help: "Logs connection events to standard error.")
    var verbose = false

    func validate() throws {
        guard (directAuth == nil) == (directHabits == nil) else {
            throw ValidationError("--direct-auth and --direct-habits go together")
        }
        guard !internalSecret.isEmpty else { throw ValidationError("--internal-secret cannot be empty") }
    }

    func scenarioSettings() -> ScenarioSettings {
        var logger = Logger(label: "habitflow-load")
        if verbose {
            logger = Logger(label: "habitflow-load", factory: { StreamLogHandler.standardError(label: $0) })
            logger.logLevel = .debug
        } else {
            logger = Logger(label: "habitflow-load", factory: { _ in SwiftLogNoOpLogHandler() })
        }
        return ScenarioSettings(
            target: target, direct: directAuth.flatMap { auth in directHabits.map { (auth, $0) } },
            internalSecret: internalSecret, connectTimeout: connectTimeout, callTimeout: timeout, logger: logger)
    }
}

/// Pacing, bounds, users, connections and the mix.
struct LoadOptions: ParsableArguments {
    @Option(help: "Virtual users. Closed loop: each runs its own request loop. Open loop: each request takes an idle one.")
    var users = 10

    @Option(help: "HTTP/2 connections to the target; requests are spread over them round-robin.")
    var connections = 1

    @Option(help: "Requests in flight at most per connection (more wait, and the wait counts in the latency).")
    var streamsPerConnection = 100

    @Option(help: ArgumentHelp("Open loop at this many requests per second (without it: closed loop).", valueName: "req/s"))
    var rate: Double?

    @Option(
        help: ArgumentHelp("How long the measured part runs (10s unless --requests is given).", valueName: "duration"),
        transform: secondsOrDuration)
    var duration: Duration?

    @Option(help: "How many requests the measured part sends (with --duration too: whichever ends first).")
    var requests: Int?

    @Option(help: ArgumentHelp("Load applied first and not counted.", valueName: "duration"), transform: secondsOrDuration)
    var warmUp: Duration = .zero

    @Option(
        help: ArgumentHelp("Weighted operations, like mark-done=40,week-view=30 (default: the scenario's).", valueName: "mix"),
        transform: { try OperationMix(parsing: $0) })
    var mix: OperationMix?

    @Option(help: "Seed of the random choice of operations (the same seed sends the same sequence).")
    var seed: UInt64 = 1

    @Option(help: "Users prepared (signed up or logged in) at once before the load.")
    var setupConcurrency = 32

    func plan(defaultMix: OperationMix) throws(PlanError) -> LoadPlan {
        var plan = LoadPlan(mix: mix ?? defaultMix)
        if let rate { plan.pacing = .openLoop(ratePerSecond: rate) }
        plan.users = users
        plan.connections = connections
        plan.streamsPerConnection = streamsPerConnection
        plan.duration = duration ?? (requests == nil ? .seconds(10) : nil)
        plan.requests = requests
        plan.warmUp = warmUp
        plan.seed = seed
        plan.setupConcurrency = setupConcurrency
        return plan
    }
}

/// `--max-p99 10ms`, `--max-p99 mark-done:5ms`, `--max-error-rate 1%`, `--min-rate 950`; each may repeat.
struct ThresholdOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Highest p50 latency, for all operations or one: 5ms or mark-done:5ms.", valueName: "[op:]duration"),
        transform: { try Threshold.maxLatency(.p50, parsing: $0) })
    var maxP50: [Threshold] = []

    @Option(help: ArgumentHelp("Highest p90 latency.", valueName: "[op:]duration"), transform: { try Threshold.maxLatency(.p90, parsing: $0) })
    var maxP90: [Threshold] = []

    @Option(help: ArgumentHelp("Highest p99 latency.", valueName: "[op:]duration"), transform: { try Threshold.maxLatency(.p99, parsing: $0) })
    var maxP99: [Threshold] = []

    @Option(name: .customLong("max-p99.9"), help: ArgumentHelp("Highest p99.9 latency.", valueName: "[op:]duration"),
        transform: { try Threshold.maxLatency(.p999, parsing: $0) })
    var maxP999: [Threshold] = []

    @Option(help: ArgumentHelp("Highest latency of any request.", valueName: "[op:]duration"), transform: { try Threshold.maxLatency(.max, parsing: $0) })
    var maxLatency: [Threshold] = []

    @Option(help: ArgumentHelp("Highest share of failed requests: 0.1% or 0.001.", valueName: "[op:]rate"), transform: { try Threshold.maxErrorRate(parsing: $0) })
    var maxErrorRate: [Threshold] = []

    @Option(help: ArgumentHelp("Lowest achieved rate, requests per second.", valueName: "[op:]req/s"), transform: { try Threshold.minRate(parsing: $0) })
    var minRate: [Threshold] = []

    /// Every threshold, checked to name only operations of the mix.
    func all(operationsInMix: [String]) throws(OptionError) -> [Threshold] {
        let all = maxP50 + maxP90 + maxP99 + maxP999 + maxLatency + maxErrorRate + minRate
        for threshold in all {
            if let operation = threshold.operation, !operationsInMix.contains(operation) {
                throw OptionError(
                    "threshold '\(threshold)' names '\(operation)', which is not in the mix ("
                        + operationsInMix.joined(separator: ", ") + ")")
            }
        }
        return all
    }
}

/// `30s`, `2m`, `500ms`, or a bare number of seconds.
@Sendable func secondsOrDuration(_ text: String) throws -> Duration {
    try parseDuration(text, bareNumbersAreSeconds: true)
}
