internal import Foundation
internal import Logging
internal import ServiceLifecycle

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The whole `main.swift` of a service executable: configuration from the environment, logging, the host, and a
/// graceful stop on SIGTERM or SIGINT (a swift-service-lifecycle `ServiceGroup`).
public enum ServiceMain {
    /// Runs `definition` as configured by `HABITFLOW_<SERVICE>_*`. A configuration error exits with `EX_CONFIG` (78).
    public static func run(_ definition: ServiceDefinition) async -> Never {
        let service = definition.name
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

        let host: ServiceHost
        do {
            host = try await ServiceHost.start(definition, configuration: configuration, logger: logger)
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

        // The group's own lines (signal received, service finished) are only worth seeing when debugging.
        var groupLogger = logger
        groupLogger.logLevel = max(logger.logLevel, .warning)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: host)], gracefulShutdownSignals: [.sigterm, .sigint], logger: groupLogger))
        do {
            try await group.run()
        } catch {
            logger.error("server failed", metadata: ["error": "\(error)"])
            exitFlushingLogs(1)
        }
        exitFlushingLogs(0)
    }

    /// Log lines wait up to a few milliseconds to be written in batches (``LineLogHandler``): none is lost at exit.
    private static func exitFlushingLogs(_ status: Int32) -> Never {
        LineLogHandler.flushStandardError()
        exit(status)
    }
}
