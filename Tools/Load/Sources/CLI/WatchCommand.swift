internal import ArgumentParser
internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowGatewayProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowLocking
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import Logging
internal import SwiftProtobuf

/// `habitflow-load watch`: the fan-out of `GatewayService/WatchChanges` (issue #30) on one gateway.
struct WatchCommand: LoadSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "WatchChanges fan-out: watchers for many users on one gateway, check-in delivery latency and memory.",
        discussion: """
            Signs up --users accounts through the gateway (one habit each), opens --watchers-per-user WatchChanges \
            streams per account over --connections HTTP/2 connections and waits until every stream has caught up. \
            Then checks in once per account (--rate check-ins a second, one MarkHabitDone each) and records, per \
            watcher, the time from the start of the check-in call to the event that carries the entry: every \
            watcher of the account must get it exactly once. Prints p50/p90/p99/max of that latency, of the \
            check-in call itself, and with --gateway-pid the gateway's resident memory before the watchers \
            opened and with all of them open (the delta per watcher). Benchmarks/watch.sh runs it on a local stack.
            """)

    @Option(help: ArgumentHelp("The gateway.", valueName: "host:port"), transform: { try RPCTarget(parsing: $0) })
    var target = RPCTarget.gatewayDefault

    @Option(help: "Accounts (each one habit, and one check-in).")
    var users = 1000

    @Option(help: "WatchChanges streams per account (the gateway allows 10 by default).")
    var watchersPerUser = 10

    @Option(help: "HTTP/2 connections the streams are spread over (a connection carries at most 100 at once).")
    var connections = 125

    @Option(help: "Check-ins per second.")
    var rate = 100.0

    @Option(help: "Sign-ups at a time (bcrypt makes them slow).")
    var signUpConcurrency = 8

    @Option(help: "The gateway's process id, to read its resident memory from /proc.")
    var gatewayPid: Int32?

    func execute(output: LoadOutput, stopper: LoadStopper) async -> Int32 {
        do {
            try await run(output: output)
            return LoadExitCode.success
        } catch {
            output.diagnostics("watch: \(error)")
            return LoadExitCode.runFailed
        }
    }

    private struct Account: Sendable {
        var options: CallOptions
        var habitID: String
    }

    private final class Tally: Sendable {
        /// When each entry's check-in started, by entry id.
        let sent = Locked<[String: ContinuousClock.Instant]>([:])
        let deliveries = Locked<[Duration]>([])
        /// How long each MarkHabitDone call took.
        let writes = Locked<[Duration]>([])
        let duplicates = Locked(0)
        let ready = Locked(0)
        let failures = Locked<[String]>([])
        /// Signalled on every catch-up and delivery.
        let wakeup = Wakeup()
    }

    private func run(output: LoadOutput) async throws {
        var logger = Logger(label: "habitflow-load")
        logger.logLevel = .error
        let channels = try (0..<max(connections, 1)).map { _ in
            try RPCChannel(configuration: RPCChannelConfiguration(host: target.host, port: target.port), logger: logger)
        }

        let started = ContinuousClock.now
        let accounts = try await signUp(channels: channels)
        output.diagnostics("signed up \(accounts.count) accounts in \(ContinuousClock.now - started)")

        let rssBefore = residentBytes()
        let tally = Tally()
        let opened = ContinuousClock.now
        var watchers: [Task<Void, Never>] = []
        for (index, account) in accounts.enumerated() {
            for copy in 0..<watchersPerUser {
                let channel = channels[(index * watchersPerUser + copy) % channels.count]
                watchers.append(Task { await Self.watch(channel: channel, account: account, tally: tally) })
            }
            // Opened in steps, not all in one instant (each starts with a catch-up of three ListChanges).
            if index % 50 == 49 { try await Task.sleep(for: .milliseconds(20)) }
        }
        let total = accounts.count * watchersPerUser
        try await waitUntil(
            timeout: .seconds(600), tally,
            progress: {
                output.diagnostics(
                    "caught up: \(tally.ready.withLock { $0 }) of \(total) (\(tally.failures.withLock { $0.count }) "
                        + "reconnections)")
            }
        ) { tally.ready.withLock { $0 } >= total }
        output.diagnostics("\(total) watchers caught up in \(ContinuousClock.now - opened)")
        try await Task.sleep(for: .seconds(2))
        let rssOpen = residentBytes()

        // One check-in per account, paced.
        let interval = Duration.seconds(1 / rate)
        await withTaskGroup(of: Void.self) { group in
            var next = ContinuousClock.now
            for (index, account) in accounts.enumerated() {
                try? await Task.sleep(until: next)
                next += interval
                let channel = channels[index % channels.count]
                group.addTask {
                    let entryID = UUID().uuidString.lowercased()
                    let start = ContinuousClock.now
                    tally.sent.withLock { $0[entryID] = start }
                    do {
                        _ = try await Habitflow_Habits_V1_HabitsService.Client(transport: channel).markHabitDone(
                            .with {
                                $0.habitID = account.habitID
                                $0.entryID = entryID
                            }, options: account.options)
                        tally.writes.withLock { $0.append(ContinuousClock.now - start) }
                    } catch {
                        tally.failures.withLock { $0.append("check-in: \(error)") }
                    }
                }
            }
        }
        let expected = accounts.count * watchersPerUser
        let complete = (try? await waitUntil(timeout: .seconds(30), tally) {
            tally.deliveries.withLock { $0.count } >= expected
        }) != nil
        try await Task.sleep(for: .milliseconds(500))  // late duplicates
        for watcher in watchers { watcher.cancel() }

        let deliveries = tally.deliveries.withLock { $0 }.sorted()
        let writeTimes = tally.writes.withLock { $0 }.sorted()
        output.standard("watchers: \(total) for \(accounts.count) users over \(channels.count) connections")
        output.standard(
            "deliveries: \(deliveries.count) of \(expected)\(complete ? "" : " (INCOMPLETE)"), duplicates: "
                + "\(tally.duplicates.withLock { $0 })")
        output.standard("check-in to watcher (from the start of MarkHabitDone): \(Self.summary(deliveries))")
        output.standard("MarkHabitDone call itself: \(Self.summary(writeTimes))")
        if let rssBefore, let rssOpen {
            let perWatcher = Double(rssOpen - rssBefore) / Double(max(total, 1))
            output.standard(
                "gateway RSS: \(rssBefore / 1_048_576) MiB before, \(rssOpen / 1_048_576) MiB with the watchers open: "
                    + String(format: "%.1f KiB per watcher", perWatcher / 1024))
        }
        let failures = tally.failures.withLock { $0 }
        output.standard("watcher reconnections and failed check-ins: \(failures.count)")
        for failure in failures.prefix(5) { output.diagnostics(failure) }
        for channel in channels { await channel.close() }
    }

    /// Signs the accounts up and gives each a habit.
    private func signUp(channels: [RPCChannel]) async throws -> [Account] {
        let run = UUID().uuidString.lowercased().prefix(8)
        return try await withThrowingTaskGroup(of: Account.self) { group in
            var accounts: [Account] = []
            for index in 0..<users {
                if index >= signUpConcurrency, let account = try await group.next() { accounts.append(account) }
                let channel = channels[index % channels.count]
                group.addTask {
                    let name = "watch_\(run)_\(index)"
                    let registered = try await Habitflow_Auth_V1_AuthService.Client(transport: channel).register(
                        .with {
                            $0.email = "\(name)@example.com"
                            $0.username = name
                            $0.password = "correct horse \(name)"
                            $0.timeZone = "UTC"
                            $0.device.deviceName = "habitflow-load watch"
                        }, options: CallOptions(timeout: .seconds(60)))
                    var options = CallOptions(timeout: .seconds(30))
                    options.metadata.add("authorization", "Bearer \(registered.tokens.accessToken)")
                    let habit = try await Habitflow_Habits_V1_HabitsService.Client(transport: channel).createHabit(
                        .with { $0.name = "Watched" }, options: options)
                    return Account(options: options, habitID: habit.id)
                }
            }
            for try await account in group { accounts.append(account) }
            return accounts
        }
    }

    /// One watcher: counts the catch-up, then times every habits entry it is sent. Like a client, it reconnects
    /// with its last cursor when the stream fails (a gateway refusing a burst of new streams answers UNAVAILABLE).
    private static func watch(channel: RPCChannel, account: Account, tally: Tally) async {
        var options = account.options
        options.timeout = nil
        var cursor = ""
        var counted = false
        var seen: Set<String> = []
        while !Task.isCancelled {
            do {
                let responses = try await Habitflow_Gateway_V1_GatewayService.Client(transport: channel).watchChanges(
                    .with { $0.cursor = cursor }, options: options)
                for try await message in responses {
                    cursor = message.cursor
                    switch message.event {
                    case .heartbeat(let beat) where beat.caughtUp && !counted:
                        counted = true
                        tally.ready.withLock { $0 += 1 }
                        tally.wakeup.signal()
                    case .changes(let changes) where changes.source == .habits:
                        let arrived = ContinuousClock.now
                        let page = try Habitflow_Habits_V1_ListChangesResponse(unpackingAny: changes.listChanges)
                        for change in page.changes {
                            guard case .entry(let entry) = change.resource,
                                let sent = tally.sent.withLock({ $0[entry.id] })
                            else { continue }
                            if seen.insert(entry.id).inserted {
                                tally.deliveries.withLock { $0.append(arrived - sent) }
                            } else {
                                tally.duplicates.withLock { $0 += 1 }
                            }
                            tally.wakeup.signal()
                        }
                    default: break
                    }
                }
            } catch {
                if Task.isCancelled { return }
                tally.failures.withLock { $0.append("watcher (reconnecting): \(error)") }
            }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 200...1000)))
        }
    }

    private struct TimedOut: Error, CustomStringConvertible {
        var description: String { "timed out waiting for the watchers" }
    }

    private func waitUntil(
        timeout: Duration, _ tally: Tally, progress: (@Sendable () -> Void)? = nil, _ condition: () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var report = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut() }
            if let progress, ContinuousClock.now >= report {
                progress()
                report += .seconds(10)
            }
            await tally.wakeup.wait(timeout: .milliseconds(100))
        }
    }

    private static func summary(_ sorted: [Duration]) -> String {
        guard !sorted.isEmpty else { return "none" }
        func at(_ quantile: Double) -> String {
            let value = sorted[min(sorted.count - 1, Int(Double(sorted.count) * quantile))]
            return String(format: "%.1f ms", Double(value.components.attoseconds) / 1e15 + Double(value.components.seconds) * 1000)
        }
        return "p50 \(at(0.5)), p90 \(at(0.9)), p99 \(at(0.99)), max \(at(1))"
    }

    /// VmRSS of --gateway-pid, in bytes.
    private func residentBytes() -> Int? {
        guard let gatewayPid,
            let status = try? String(contentsOfFile: "/proc/\(gatewayPid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        return kilobytes * 1024
    }
}
