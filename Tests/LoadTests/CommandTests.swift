import Foundation
import GRPCInteropTesting
import HabitFlowLoad
import HabitFlowLocking
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import Logging
import SwiftProtobuf
import Testing

let quietLogger = Logger(label: "load-tests", factory: { _ in SwiftLogNoOpLogHandler() })

/// What the command wrote to standard output and standard error.
final class CapturedOutput: Sendable {
    private let lines = Locked<(standard: [String], diagnostics: [String])>(([], []))

    var output: LoadOutput {
        LoadOutput(
            standard: { line in self.lines.withLock { $0.standard.append(line) } },
            diagnostics: { line in self.lines.withLock { $0.diagnostics.append(line) } })
    }

    var standard: String { lines.withLock { $0.standard.joined(separator: "\n") } }
    var diagnostics: String { lines.withLock { $0.diagnostics.joined(separator: "\n") } }
}

func runCommand(_ arguments: [String]) async -> (status: Int32, output: CapturedOutput) {
    let captured = CapturedOutput()
    let status = await LoadCLI.execute(arguments, output: captured.output)
    return (status, captured)
}

/// A server on loopback, port 0, with the given services (the interop TestService by default).
func startServer(services: [any RPCService] = [InteropTestService()]) async throws -> (RPCServer, Int) {
    let server = RPCServer(
        configuration: RPCServerConfiguration(host: "127.0.0.1", port: 0), services: services, logger: quietLogger)
    try await server.start()
    let port = try #require(server.localAddress?.port)
    return (server, port)
}

func temporaryPath(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("habitflow-load-\(UUID().uuidString)-\(name)").path
}

/// The command line: options, exit statuses and result files, with the interop scenario against a real server.
@Suite struct CommandTests {
    @Test(arguments: [
        (["run", "--rate", "abc"], "--rate"),
        (["run", "--duration", "5 parsecs"], "is not a duration like 250us, 10ms, 1.5s or 2m"),
        (["run", "--max-p99", "10"], "'10' needs a unit: for example 10ms or 10s"),
        (["run", "--scenario", "nope"], "unknown scenario 'nope'; the scenarios are: read-heavy, write-heavy, mixed, interop"),
        (["run", "--scenario", "interop", "--mix", "unary-call=2,dance=1"], "scenario 'interop' has no operation 'dance'"),
        (["run", "--scenario", "interop", "--max-p99", "dance:5ms"], "names 'dance', which is not in the mix"),
        (["run", "--scenario", "interop", "--users", "0"], "--users must be at least 1"),
        (["run", "--scenario", "interop", "--rate=-5"], "--rate must be a positive number"),
        (["run", "--target", "localhost:99999"], "port '99999' is not a number from 1 to 65535"),
        (["run", "--bogus"], "Unknown option '--bogus'"),
        (["run", "--direct-auth", "127.0.0.1:7071"], "--direct-auth and --direct-habits go together"),
        (["run", "--accounts", "/nonexistent/accounts.jsonl"], "accounts.jsonl"),
    ])
    func badOptionsExitWithUsageStatus(arguments: [String], message: String) async {
        let (status, output) = await runCommand(arguments)
        #expect(status == LoadExitCode.usage)
        #expect(output.diagnostics.contains(message), "\(output.diagnostics)")
    }

    @Test func helpAndScenarioList() async {
        let (status, output) = await runCommand(["--help"])
        #expect(status == 0)
        #expect(output.standard.contains("USAGE: habitflow-load"))
        #expect(output.standard.contains("Exit status"))
        let (runStatus, runHelp) = await runCommand(["run", "--help"])
        #expect(runStatus == 0)
        #expect(runHelp.standard.contains("--max-p99.9"))
        let (listStatus, list) = await runCommand(["scenarios"])
        #expect(listStatus == 0)
        #expect(list.standard.contains("interop: "))
        #expect(list.standard.contains("default mix: unary-call=3,empty-call=1"))
    }

    @Test func aTargetNobodyListensOnIsReportedClearly() async throws {
        // A port that was just free: start a server there and stop it.
        let (server, port) = try await startServer()
        await server.shutdown()
        let (status, output) = await runCommand([
            "run", "--scenario", "interop", "--target", "127.0.0.1:\(port)", "--duration", "1s",
        ])
        #expect(status == LoadExitCode.runFailed)
        #expect(output.diagnostics.contains("cannot connect to 127.0.0.1:\(port)"), "\(output.diagnostics)")
        #expect(output.diagnostics.contains("is the target running?"))
        #expect(output.standard.isEmpty)
    }

    @Test func aServerWithoutTheScenariosServiceFailsEveryRequest() async throws {
        let (server, port) = try await startServer(services: [])
        let (status, output) = await runCommand([
            "run", "--scenario", "interop", "--target", "127.0.0.1:\(port)", "--requests", "20", "--quiet",
        ])
        await server.shutdown()
        #expect(status == LoadExitCode.runFailed)
        #expect(output.standard.contains("UNIMPLEMENTED"))
        #expect(output.diagnostics.contains("no request succeeded; is 127.0.0.1:\(port) the right target"))
    }

    @Test func closedLoopRunAgainstTheInteropServerWritesJSONAndSVG() async throws {
        let (server, port) = try await startServer()
        let json = temporaryPath("result.json")
        let svg = temporaryPath("latency.svg")
        defer {
            try? FileManager.default.removeItem(atPath: json)
            try? FileManager.default.removeItem(atPath: svg)
        }
        let (status, output) = await runCommand([
            "run", "--scenario", "interop", "--target", "127.0.0.1:\(port)", "--users", "8", "--connections", "2",
            "--requests", "400", "--warm-up", "0.3s", "--json", json, "--svg", svg, "--max-p99", "10s",
            "--max-error-rate", "0",
        ])
        await server.shutdown()
        #expect(status == 0, "\(output.diagnostics)")
        #expect(output.standard.contains("pass  p99 ≤ 10.00s"))
        #expect(output.diagnostics.contains("opened 2 connections"))

        let report = try LoadReport.decode(Data(contentsOf: URL(fileURLWithPath: json)))
        #expect(report.requests == 400 && report.failed == 0)
        #expect(report.settings.pacing == "closed-loop")
        #expect(report.operations.map(\.name) == ["unary-call", "empty-call"])
        #expect(report.operations.allSatisfy { $0.succeeded > 0 })
        #expect(report.latencyMs.p50 > 0 && report.latencyMs.p50 <= report.latencyMs.p99)
        #expect(report.passed)
        let plot = try SVGStructure(String(contentsOfFile: svg, encoding: .utf8))
        #expect(plot.polylines == 3)
    }

    @Test func openLoopRunKeepsTheRateAndAMissedThresholdExitsWithOne() async throws {
        let (server, port) = try await startServer()
        let json = temporaryPath("result.json")
        defer { try? FileManager.default.removeItem(atPath: json) }
        let (status, output) = await runCommand([
            "run", "--scenario", "interop", "--target", "127.0.0.1:\(port)", "--users", "20", "--rate", "200",
            "--duration", "1s", "--mix", "empty-call", "--json", json, "--max-p99", "1us",
        ])
        await server.shutdown()
        #expect(status == LoadExitCode.thresholdMissed, "\(output.diagnostics)")
        #expect(output.standard.contains("FAIL  p99 ≤ 1µs"))
        let report = try LoadReport.decode(Data(contentsOf: URL(fileURLWithPath: json)))
        #expect(report.requests == 200 && report.failed == 0)
        #expect(report.settings.targetRatePerSecond == 200)
        // Never faster than the schedule (slower is allowed: a busy machine wakes the sender late).
        #expect(report.ratePerSecond > 0 && report.ratePerSecond <= 200.5)
        #expect(!report.passed)
    }
}
