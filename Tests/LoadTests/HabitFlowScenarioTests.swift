import HabitFlowInternalCredential
import HabitFlowCalendar
import Foundation
import HabitFlowAuth
import HabitFlowGateway
import HabitFlowHabits
import HabitFlowHabitsProtos
import HabitFlowLoad
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import HabitFlowTestSupport
import Logging
import Testing

/// The real auth and habits services (ServiceHost, port 0, the test Postgres), which the HabitFlow scenarios call
/// directly with the internal credential, as the gateway would.
struct ServiceStack {
    static let secret = "load-tests-internal-secret"
    let auth: ServiceHost
    let habits: ServiceHost
    /// In front of both when asked for.
    let gateway: ServiceHost?

    static func start(withGateway: Bool = false) async throws -> ServiceStack {
        var habitsConfiguration = ServiceConfiguration(
            service: "habits", port: 0, databaseURL: try TestEnvironment.serviceURL("habits"),
            sqlDirectory: TestEnvironment.sqlRoot, internalSecret: secret)
        habitsConfiguration.metricsPort = nil
        habitsConfiguration.logLevel = .error
        // Without its relay: the habits outbox is shared with the habits suite, whose relay delivers those events.
        let habits = try await ServiceHost.start(
            HabitsServiceDefinition.make().withoutOutboxRelay, configuration: habitsConfiguration, logger: quietLogger)

        var settings = AuthSettings(keyEncryptionKey: Array(repeating: 7, count: 32))
        settings.bcryptCost = 4
        settings.maintenanceInterval = nil
        var authConfiguration = ServiceConfiguration(
            service: "auth", port: 0, databaseURL: try TestEnvironment.serviceURL("auth"),
            sqlDirectory: TestEnvironment.sqlRoot, internalSecret: secret)
        authConfiguration.metricsPort = nil
        authConfiguration.logLevel = .error
        // Auth's account events go to habits.
        authConfiguration.serviceAddresses["habits"] = [.init(host: "127.0.0.1", port: habits.port)]
        do {
            let auth = try await ServiceHost.start(
                AuthServiceDefinition.make(settings: settings), configuration: authConfiguration, logger: quietLogger)
            guard withGateway else { return ServiceStack(auth: auth, habits: habits, gateway: nil) }
            var gatewayService = ServiceConfiguration(
                service: "gateway", port: 0, databaseURL: nil, sqlDirectory: TestEnvironment.sqlRoot,
                internalSecret: secret)
            gatewayService.metricsPort = nil
            gatewayService.logLevel = .error
            for (name, port) in [("auth", auth.port), ("habits", habits.port)] {
                gatewayService.serviceAddresses[name] = [.init(host: "127.0.0.1", port: port)]
            }
            var configuration = GatewayConfiguration(service: gatewayService)
            // One test client address for every virtual user.
            configuration.addressRateLimit = .init(perSecond: 100_000, burst: 100_000)
            do {
                let gateway = try await Gateway.start(configuration: configuration, logger: quietLogger)
                return ServiceStack(auth: auth, habits: habits, gateway: gateway)
            } catch {
                await auth.shutdown()
                throw error
            }
        } catch {
            await habits.shutdown()
            throw error
        }
    }

    var directArguments: [String] {
        [
            "--direct-auth", "127.0.0.1:\(auth.port)", "--direct-habits", "127.0.0.1:\(habits.port)",
            "--internal-secret", Self.secret,
        ]
    }

    func stop() async {
        await gateway?.shutdown()
        await auth.shutdown()
        await habits.shutdown()
    }
}

/// A short run of each HabitFlow scenario against the real services: zero errors and a complete report.
@Suite struct HabitFlowScenarioTests {
    @Test(arguments: ["mixed", "read-heavy", "write-heavy"])
    func scenarioRunsWithoutErrors(scenario: String) async throws {
        let stack = try await ServiceStack.start()
        let json = temporaryPath("\(scenario).json")
        defer { try? FileManager.default.removeItem(atPath: json) }
        let (status, output) = await runCommand(
            ["run", "--scenario", scenario, "--users", "3", "--connections", "2", "--requests", "150", "--quiet",
             "--json", json, "--max-error-rate", "0"] + stack.directArguments)
        await stack.stop()
        #expect(status == 0, "\(output.diagnostics)\n\(output.standard)")
        #expect(output.diagnostics.contains("prepared 3 users"))
        let report = try LoadReport.decode(Data(contentsOf: URL(fileURLWithPath: json)))
        #expect(report.requests == 150 && report.failed == 0, "\(report.errorsByCode)")
        #expect(report.settings.scenario == scenario)
        // Every operation of the mix ran (150 draws leave none of these weights out).
        let ran = report.operations.filter { $0.succeeded > 0 }.map(\.name)
        #expect(ran.count == report.operations.count, "ran \(ran)")
        #expect(report.latencyMs.p99 > 0)
    }

    @Test func mixedScenarioThroughTheGatewayWithBearerTokens() async throws {
        let stack = try await ServiceStack.start(withGateway: true)
        let gatewayPort = try #require(stack.gateway?.port)
        let json = temporaryPath("gateway.json")
        defer { try? FileManager.default.removeItem(atPath: json) }
        let (status, output) = await runCommand([
            "run", "--scenario", "mixed", "--target", "127.0.0.1:\(gatewayPort)", "--users", "3", "--requests", "150",
            "--quiet", "--json", json, "--max-error-rate", "0",
        ])
        await stack.stop()
        #expect(status == 0, "\(output.diagnostics)\n\(output.standard)")
        let report = try LoadReport.decode(Data(contentsOf: URL(fileURLWithPath: json)))
        #expect(report.requests == 150 && report.failed == 0, "\(report.errorsByCode)")
        #expect(report.operations.first { $0.name == "dashboard" }.map { $0.succeeded > 0 } == true)
        #expect(report.operations.allSatisfy { $0.succeeded > 0 }, "\(report.operations.map { ($0.name, $0.succeeded) })")
    }

    @Test func seedMarksDoneOneByOneAndARunResumesTheSeededAccounts() async throws {
        let stack = try await ServiceStack.start()
        let accounts = temporaryPath("accounts.jsonl")
        let figures = temporaryPath("seed.json")
        defer {
            try? FileManager.default.removeItem(atPath: accounts)
            try? FileManager.default.removeItem(atPath: figures)
        }
        let (status, output) = await runCommand(
            ["seed", "--entries", "mark-done", "--users", "3", "--habits", "2", "--days", "10", "--done-ratio", "0.5",
             "--concurrency", "8", "--connections", "2", "--accounts", accounts, "--json", figures]
                + stack.directArguments)
        #expect(status == 0, "\(output.diagnostics)")
        #expect(output.standard.contains("accounts: 3 with 6 habits"))
        var plan = SeedPlan()
        plan.users = 3
        plan.habitsPerUser = 2
        plan.days = 10
        plan.doneRatio = 0.5
        let expected = plan.entryCount
        #expect(expected > 0 && expected < 60)
        let written = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: figures))) as? [String: Double])
        #expect(written["entries"] == Double(expected))
        #expect(written["failed"] == 0)

        // The entries are in the habits service: count them back per user and habit.
        let seeded = try SeededAccountsFile.read(accounts)
        #expect(seeded.count == 3)
        let channel = try RPCChannel(
            configuration: RPCChannelConfiguration(host: "127.0.0.1", port: stack.habits.port),
            interceptors: [
                InternalCredentialClientInterceptor(credential: InternalCredential(secret: ServiceStack.secret), caller: "gateway")
            ], logger: quietLogger)
        let habits = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        func date(_ daysAgo: Int) -> Habitflow_Habits_V1_LocalDate {
            let parts = calendar.dateComponents([.year, .month, .day], from: Date().addingTimeInterval(-86_400 * Double(daysAgo)))
            return .with { $0.year = Int32(parts.year ?? 0); $0.month = Int32(parts.month ?? 0); $0.day = Int32(parts.day ?? 0) }
        }
        var counted = 0
        for account in seeded {
            let options = CallOptions.onBehalf(of: try #require(UUID(uuidString: account.userID)))
            let list = try await habits.listHabits(Habitflow_Habits_V1_ListHabitsRequest(), options: options)
            #expect(list.habits.count == 2)
            for habit in list.habits {
                let entries = try await habits.listEntries(
                    .with {
                        $0.habitID = habit.id
                        $0.startDate = date(9)
                        $0.endDate = date(0)
                        $0.pageSize = 100
                    }, options: options)
                counted += entries.entries.count
            }
        }
        await channel.close()
        #expect(counted == expected)

        // A run resumes each account with its saved refresh token and saves the rotated one back.
        let (runStatus, run) = await runCommand(
            ["run", "--scenario", "read-heavy", "--accounts", accounts, "--users", "3", "--requests", "30", "--quiet"]
                + stack.directArguments)
        await stack.stop()
        #expect(runStatus == 0, "\(run.diagnostics)")
        let resumed = try SeededAccountsFile.read(accounts)
        #expect(resumed.map(\.email) == seeded.map(\.email))
        #expect(zip(seeded, resumed).allSatisfy { $0.refreshToken != $1.refreshToken && $1.refreshToken != nil })
    }

    /// The default path: five years of history through ImportEntries, in batches smaller than one user's history.
    @Test func seedImportsFiveYearsOfHistory() async throws {
        let stack = try await ServiceStack.start()
        let accounts = temporaryPath("five-years.jsonl")
        let figures = temporaryPath("five-years.json")
        defer {
            try? FileManager.default.removeItem(atPath: accounts)
            try? FileManager.default.removeItem(atPath: figures)
        }
        let (status, output) = await runCommand(
            ["seed", "--users", "2", "--habits", "3", "--days", "1825", "--batch-size", "1000", "--concurrency", "2",
             "--accounts", accounts, "--json", figures] + stack.directArguments)
        #expect(status == 0, "\(output.diagnostics)")
        #expect(output.standard.contains("through import, 0 failed"), "\(output.standard)")
        var plan = SeedPlan()
        plan.users = 2
        plan.habitsPerUser = 3
        plan.days = 1825
        let expected = plan.entryCount
        #expect(expected > 6000)
        let written = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: figures))) as? [String: Double])
        #expect(written["entries"] == Double(expected))
        #expect(written["failed"] == 0)

        // Count them back per user with AggregateEntries, and read five years of score history.
        let signer = InternalCredentialClientInterceptor(
            credential: InternalCredential(secret: ServiceStack.secret), caller: "load-tests")
        let channel = try RPCChannel(
            configuration: RPCChannelConfiguration(host: "127.0.0.1", port: stack.habits.port), interceptors: [signer],
            logger: quietLogger)
        let internalAPI = Habitflow_Habits_V1_HabitsInternal.Client(transport: channel)
        let publicAPI = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
        func day(_ daysAgo: Int) -> LocalDate {
            LocalDate(daysSinceEpoch: Int((Date().timeIntervalSince1970 / 86_400).rounded(.down)) - daysAgo)
        }
        func date(_ daysAgo: Int) -> Habitflow_Habits_V1_LocalDate {
            let day = day(daysAgo)
            return .with { $0.year = Int32(day.year); $0.month = Int32(day.month); $0.day = Int32(day.day) }
        }
        var counted: Int64 = 0
        for account in try SeededAccountsFile.read(accounts) {
            let userID = try #require(UUID(uuidString: account.userID))
            let habits = try await publicAPI.listHabits(.init(), options: .onBehalf(of: userID)).habits
            #expect(habits.count == 3)
            let aggregates = try await internalAPI.aggregateEntries(
                .with {
                    $0.userID = account.userID
                    $0.habitIds = habits.map(\.id)
                    $0.startDate = date(1824)
                    $0.endDate = date(0)
                })
            counted += aggregates.aggregates.reduce(0) { $0 + $1.entryCount }
            // The habits count from their first entry's week, so the weeks of the imported years score them.
            let history = try await publicAPI.getScoreHistory(
                .with {
                    let oldest = IsoWeek(containing: day(1800))
                    $0.startWeek = .with { $0.year = Int32(oldest.year); $0.week = Int32(oldest.week) }
                }, options: .onBehalf(of: userID)
            ).weeks
            #expect(history.count > 250)
            #expect(history.allSatisfy { $0.score.totalHabits == 3 }, "\(history.prefix(3).map(\.score.display))")
            #expect(history.contains { $0.score.metHabits > 0 })
        }
        await channel.close()
        await stack.stop()
        #expect(counted == Int64(expected))
    }
}

/// `--ledger`: one line per call with what it wrote, so a checker (scripts/faults) can match acknowledged writes
/// against the database.
@Suite struct LedgerTests {
    @Test func runRecordsEveryCallWithTheIDsItWrote() async throws {
        let stack = try await ServiceStack.start()
        let ledger = temporaryPath("ledger.tsv")
        defer { try? FileManager.default.removeItem(atPath: ledger) }
        let (status, output) = await runCommand(
            ["run", "--scenario", "write-heavy", "--users", "2", "--requests", "60", "--quiet", "--max-error-rate", "0",
             "--mix", "mark-done=6,week-view=2,sign-up=1", "--ledger", ledger] + stack.directArguments)
        await stack.stop()
        #expect(status == 0, "\(output.diagnostics)\n\(output.standard)")
        let lines = try String(contentsOfFile: ledger, encoding: .utf8).split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
        #expect(lines.count == 60)
        #expect(lines.allSatisfy { $0.count == 6 && Int64($0[0]) != nil && $0[2] == "OK" }, "\(lines.prefix(3))")
        let marks = lines.filter { $0[1] == "mark-done" }
        let signUps = lines.filter { $0[1] == "sign-up" }
        #expect(!marks.isEmpty && !signUps.isEmpty)
        // Each check-in names the entry id it sent, all different; each sign-up the account it made.
        #expect(marks.allSatisfy { UUID(uuidString: $0[4]) != nil && UUID(uuidString: $0[3]) != nil })
        #expect(Set(marks.map { $0[4] }).count == marks.count)
        #expect(signUps.allSatisfy { UUID(uuidString: $0[3]) != nil && $0[4].hasPrefix("load_") })
        #expect(lines.filter { $0[1] == "week-view" }.allSatisfy { $0[4] == "-" })
    }

    @Test func lineEscapesSeparatorsAndMarksEmptyFields() {
        let line = LoadLedger.Line(
            time: Date(timeIntervalSince1970: 1.5), operation: "mark-done", status: "UNAVAILABLE", userID: nil,
            clientID: "", detail: "a\tb\nc")
        #expect(line.text == "1500\tmark-done\tUNAVAILABLE\t-\t-\ta b c\n")
    }
}
