internal import Dispatch
public import Foundation
public import Logging

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// A long-running process part that ``ServiceMain`` starts, serves and stops: a ``ServiceHost`` or the gateway.
public protocol ServiceProcess: Sendable {
    /// The RPC port it listens on.
    var port: Int { get }
    /// The Prometheus port, when it serves one.
    var metricsPort: Int? { get }
    /// Serves until ``shutdown()`` completes.
    func run() async throws
    /// Graceful: stops accepting, lets calls in flight finish, then releases everything.
    func shutdown() async
}

extension ServiceHost: ServiceProcess {}

/// The whole `main.swift` of a service executable: configuration from the environment, logging, the host, and a
/// graceful stop on SIGTERM or SIGINT.
public enum ServiceMain {
    public static func run(_ definition: ServiceDefinition) async -> Never {
        await run(service: definition.name) { configuration, logger in
            try await ServiceHost.start(definition, configuration: configuration, logger: logger)
        }
    }

    /// The same for a process that is not a plain ``ServiceHost`` (the gateway): `start` builds it from the
    /// configuration `HABITFLOW_<SERVICE>_*` describes. A configuration error exits with `EX_CONFIG` (78).
    public static func run(
        service: String,
        start: (ServiceConfiguration, Logger) async throws -> any ServiceProcess
    ) async -> Never {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration.fromEnvironment(service: service)
        } catch {
            FileHandle.standardError.write(Data("habitflow-\(service): \(error)\n".utf8))
            exit(78)  // EX_CONFIG
        }
        // While TZ is unset, glibc stats /etc/localtime again for every log line's timestamp (a syscall per call
        // at info level, in the gateway's access log). Naming that same file keeps the zone and drops the syscall.
        setenv("TZ", ":/etc/localtime", 0)
        LoggingSystem.bootstrap { LineLogHandler.standardError(label: $0) }
        var logger = Logger(label: "habitflow-\(service)")
        logger.logLevel = configuration.logLevel

        let host: any ServiceProcess
        do {
            host = try await start(configuration, logger)
        } catch let error as ConfigurationError {
            logger.critical("invalid configuration", metadata: ["error": "\(error)"])
            exitFlushingLogs(78)
        } catch {
            logger.critical("could not start", metadata: ["error": "\(error)"])
            exitFlushingLogs(1)
        }
        logger.notice(
            "serving",
            metadata: [
                "address": "\(configuration.host):\(host.port)",
                "metrics": "\(host.metricsPort.map { "\(configuration.host):\($0)" } ?? "off")",
            ])

        // The server stops accepting before the pool closes; exit only once everything has closed.
        let (stopped, markStopped) = AsyncStream<Void>.makeStream()
        let signals = [SIGTERM, SIGINT].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
            source.setEventHandler {
                logger.notice("stopping")
                Task {
                    await host.shutdown()
                    markStopped.finish()
                }
            }
            source.resume()
            return source
        }
        do {
            try await host.run()
        } catch {
            logger.error("server failed", metadata: ["error": "\(error)"])
            exitFlushingLogs(1)
        }
        for await _ in stopped {}
        withExtendedLifetime(signals) {}
        exitFlushingLogs(0)
    }

    /// Log lines wait up to a few milliseconds to be written in batches (``LineLogHandler``): none is lost at exit.
    private static func exitFlushingLogs(_ status: Int32) -> Never {
        LineLogHandler.flushStandardError()
        exit(status)
    }
}
