public import ArgumentParser
internal import Dispatch
internal import Foundation

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// Where the driver writes: the summary to standard output, progress lines and diagnostics to standard error.
public struct LoadOutput: Sendable {
    public var standard: @Sendable (String) -> Void
    public var diagnostics: @Sendable (String) -> Void

    public init(standard: @escaping @Sendable (String) -> Void, diagnostics: @escaping @Sendable (String) -> Void) {
        self.standard = standard
        self.diagnostics = diagnostics
    }

    public static let console = LoadOutput(
        standard: { print($0) },
        diagnostics: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
}

/// The driver's exit statuses (also in `habitflow-load --help`).
public enum LoadExitCode {
    public static let success: Int32 = 0
    /// A threshold given on the command line was missed.
    public static let thresholdMissed: Int32 = 1
    /// The run could not start (target unreachable, users could not be prepared), no request succeeded, or a
    /// result file could not be written.
    public static let runFailed: Int32 = 2
    /// Bad options (ArgumentParser's EX_USAGE).
    public static let usage: Int32 = ExitCode.validationFailure.rawValue
}

/// `habitflow-load`: the root command; `run` is the default subcommand.
public struct LoadCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "habitflow-load",
        abstract: "Load-test driver for HabitFlow's gateway (and any grpc.testing.TestService server).",
        discussion: """
            Exit status: 0 when the run finished and every threshold passed; 1 when a threshold (--max-p99, \
            --max-error-rate, --min-rate...) was missed; 2 when the run could not start (target unreachable, \
            users could not be prepared), no request succeeded, or a result file could not be written; 64 for bad \
            options.
            """,
        subcommands: [RunCommand.self, SeedCommand.self, WatchCommand.self, ScenariosCommand.self],
        defaultSubcommand: RunCommand.self)

    public init() {}
}

/// A subcommand the CLI runs itself, so tests get its exit status instead of a process exit.
protocol LoadSubcommand: ParsableCommand {
    func execute(output: LoadOutput, stopper: LoadStopper) async -> Int32
}

public enum LoadCLI {
    /// Parses `arguments` (without the program name), runs the subcommand and returns the exit status.
    public static func execute(
        _ arguments: [String], output: LoadOutput = .console, stopper: LoadStopper = LoadStopper()
    ) async -> Int32 {
        do {
            var command = try LoadCommand.parseAsRoot(arguments)
            if let subcommand = command as? any LoadSubcommand {
                return await subcommand.execute(output: output, stopper: stopper)
            }
            // ArgumentParser's own commands (`help`, `--help`) end by throwing what they want printed.
            try command.run()
            return LoadExitCode.success
        } catch {
            let code = LoadCommand.exitCode(for: error)
            let message = LoadCommand.fullMessage(for: error)
            // Help goes to standard output (exit 0); mistakes to standard error.
            if code == .success { output.standard(message) } else { output.diagnostics(message) }
            return code.rawValue
        }
    }

    /// The whole program: Ctrl-C stops the load and still prints what was measured; a second Ctrl-C exits at once.
    public static func main() async -> Never {
        let stopper = LoadStopper()
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        interrupt.setEventHandler {
            if stopper.isStopped { exit(130) }
            FileHandle.standardError.write(Data("\nstopping: waiting for the requests in flight (Ctrl-C again quits)\n".utf8))
            stopper.stop()
        }
        interrupt.resume()
        let status = await execute(Array(CommandLine.arguments.dropFirst()), stopper: stopper)
        exit(status)
    }
}

/// `habitflow-load scenarios`: what each scenario does and its operations.
struct ScenariosCommand: LoadSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "scenarios", abstract: "Lists the scenarios, their operations and default mixes.")

    func execute(output: LoadOutput, stopper: LoadStopper) async -> Int32 {
        for entry in ScenarioCatalog.entries {
            output.standard("\(entry.name): \(entry.summary)")
            output.standard("  operations: \(entry.operations.joined(separator: ", "))")
            output.standard("  default mix: \(entry.defaultMix)")
        }
        return LoadExitCode.success
    }
}
