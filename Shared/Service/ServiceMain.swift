internal import Dispatch
public import Foundation
internal import Logging

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The whole `main.swift` of a service executable: configuration from the environment, logging, the host, and a
/// graceful stop on SIGTERM or SIGINT.
public enum ServiceMain {
    public static func run(_ definition: ServiceDefinition) async -> Never {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration.fromEnvironment(service: definition.name)
        } catch {
            FileHandle.standardError.write(Data("habitflow-\(definition.name): \(error)\n".utf8))
            exit(78)  // EX_CONFIG
        }
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "habitflow-\(definition.name)")
        logger.logLevel = configuration.logLevel

        let host: ServiceHost
        do {
            host = try await ServiceHost.start(definition, configuration: configuration, logger: logger)
        } catch {
            logger.critical("could not start", metadata: ["error": "\(error)"])
            exit(1)
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
            exit(1)
        }
        for await _ in stopped {}
        withExtendedLifetime(signals) {}
        exit(0)
    }
}
