internal import ArgumentParser
internal import Foundation

/// `habitflow-load seed`: bulk-loads accounts, habits and years of entries through the RPCs, and writes the accounts
/// file `run --accounts` resumes.
struct SeedCommand: LoadSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "seed",
        abstract: "Bulk-loads accounts, habits and past entries through the services' RPCs; reports the rate.",
        discussion: """
            Signs up --users accounts (time zone UTC) through auth with --habits habits each (created through the \
            public API), then marks each habit done on about --done-ratio of the last --days days (the same days \
            for the same --seed). Entries go in batches of --batch-size through the habits service's internal \
            ImportEntries (--entries import, the default: straight to habits at --import-habits, signed with \
            --internal-secret; habits then count from their earliest entry's week), or one MarkHabitDone call \
            each on the seeding route (--entries mark-done), --concurrency calls at a time. The accounts (email, \
            password, user id, refresh token) go to --accounts, one JSON object a line; `habitflow-load run \
            --accounts FILE` resumes them and saves their rotated refresh tokens back.

            Rates measured on a shared 2-core machine: sign-ups about 4.5 accounts/s (bcrypt at cost 12), entries \
            about 37,000/s through import (five years for 1,000 users x 15 habits, 16.4 million entries, in about \
            7 minutes) against about 450/s through mark-done.

            Example (straight to the services, no gateway in the path):
              habitflow-load seed --direct-auth 127.0.0.1:7071 --direct-habits 127.0.0.1:7072 \\
                  --users 1000 --habits 15 --days 1825 --accounts accounts.jsonl
            """)

    @OptionGroup var endpoint: ConnectionOptions

    @Option(help: "Accounts to sign up.")
    var users = 1000

    @Option(help: "Habits per account (at most 15).")
    var habits = 15

    @Option(help: "Days of history, ending today (1825 = 5 years).")
    var days = 1825

    @Option(help: "Share of days each habit is marked done (0 to 1).")
    var doneRatio = 0.6

    @Option(
        help: ArgumentHelp(
            "How entries are written: import (ImportEntries batches) or mark-done (one call each).",
            valueName: "import|mark-done"),
        transform: { text in
            guard let path = SeedEntryPath(rawValue: text) else {
                throw ValidationError("--entries must be import or mark-done, got '\(text)'")
            }
            return path
        })
    var entries = SeedEntryPath.importEntries

    @Option(help: "Entries per ImportEntries call (at most 10000).")
    var batchSize = 10_000

    @Option(
        help: ArgumentHelp(
            "Habits service address for ImportEntries (default: --direct-habits, else the local stack's 127.0.0.1:7072)."
                + " The gateway never routes it.",
            valueName: "host:port"),
        transform: { try RPCTarget(parsing: $0) })
    var importHabits: RPCTarget?

    @Option(help: "Calls in flight at once while adding entries (default: 4 with --entries import, 64 with mark-done).")
    var concurrency: Int?

    @Option(help: "Sign-ups in flight at once (each is a bcrypt hash in auth; keep it near auth's cores × 4).")
    var signupConcurrency = 8

    @Option(help: "Connections (to the gateway, or to each service with --direct-*).")
    var connections = 4

    @Option(help: "Seeds which days are done.")
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("Where to write the accounts (JSON Lines).", valueName: "path"))
    var accounts: String

    @Option(help: ArgumentHelp("Writes the figures as JSON to this file.", valueName: "path"))
    var json: String?

    func execute(output: LoadOutput, stopper: LoadStopper) async -> Int32 {
        var plan = SeedPlan()
        plan.users = users
        plan.habitsPerUser = habits
        plan.days = days
        plan.doneRatio = doneRatio
        plan.entryPath = entries
        plan.batchSize = batchSize
        plan.concurrency = concurrency ?? SeedPlan.defaultConcurrency(for: entries)
        plan.signupConcurrency = signupConcurrency
        plan.connections = connections
        plan.seed = seed
        do {
            try plan.validate()
        } catch {
            output.diagnostics("habitflow-load: \(error)")
            return LoadExitCode.usage
        }
        let settings = endpoint.scenarioSettings()
        let importRoute = EntryImportRoute(
            habits: importHabits ?? settings.direct?.habits ?? RPCTarget(host: "127.0.0.1", port: 7072),
            internalSecret: settings.internalSecret)
        output.diagnostics(
            "habitflow-load: seeding \(users) accounts × \(habits) habits × \(days) days (done ratio \(doneRatio)) "
                + "through \(settings.targetDescription)"
                + (entries == .importEntries ? ", entries through ImportEntries at \(importRoute.habits)" : ""))
        let seeder = Seeder(
            connector: settings.habitFlowConnector, importRoute: importRoute, callTimeout: settings.callTimeout,
            plan: plan, stopper: stopper, log: { output.diagnostics($0) })
        let result: SeedResult
        do {
            result = try await seeder.run()
        } catch let unreachable as TargetUnreachable {
            output.diagnostics("habitflow-load: \(unreachable)\n  is the target running?")
            return LoadExitCode.runFailed
        } catch {
            output.diagnostics("habitflow-load: seeding failed: \(error)")
            return LoadExitCode.runFailed
        }

        let failed = result.failures.values.reduce(0, +)
        output.standard(
            "accounts: \(result.accounts.count) with \(result.habits) habits in "
                + "\(formatSeconds(result.accountsDuration)) (\(String(format: "%.1f", result.accountsPerSecond)) accounts/s)")
        output.standard(
            "entries: \(result.entries) in \(formatSeconds(result.entriesDuration)) "
                + "(\(String(format: "%.0f", result.entriesPerSecond)) entries/s) through \(entries.rawValue), "
                + "\(failed) failed"
                + (result.failures.isEmpty
                    ? "" : " (" + result.failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"))
        if result.stoppedEarly { output.standard("stopped early: the history is incomplete") }
        do {
            try SeededAccountsFile.write(result.accounts, to: accounts)
            output.diagnostics("habitflow-load: wrote \(result.accounts.count) accounts to \(accounts)")
            if let json {
                let figures: [String: Double] = [
                    "accounts": Double(result.accounts.count), "habits": Double(result.habits),
                    "entries": Double(result.entries), "failed": Double(failed),
                    "accountsSeconds": result.accountsDuration.seconds, "accountsPerSecond": result.accountsPerSecond,
                    "entriesSeconds": result.entriesDuration.seconds, "entriesPerSecond": result.entriesPerSecond,
                ]
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                try encoder.encode(figures).write(to: URL(fileURLWithPath: json))
            }
        } catch {
            output.diagnostics("habitflow-load: cannot write the result: \(error.localizedDescription)")
            return LoadExitCode.runFailed
        }
        return failed == 0 && !result.stoppedEarly ? LoadExitCode.success : LoadExitCode.runFailed
    }
}
