// The auth service's benchmark (Benchmarks/auth.sh runs it against a throwaway Postgres): how many logins per
// second bcrypt at cost 12 allows per core, and the latency of a cheap RPC (CheckSession, what the gateway calls on
// every request) alone and while logins saturate the hashing threads: bcrypt runs on its own threads, so the event
// loops keep answering. Prints figures; it is not a test.
import HabitFlowInternalCredential
import Foundation
import HabitFlowAuth
import HabitFlowAuthProtos
import HabitFlowCrypto
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import Logging
import NIOCore
import NIOPosix

struct Options {
    var databaseURL = ""
    var sqlDirectory = ProcessInfo.processInfo.environment["HABITFLOW_SQL_DIR"] ?? "Schemas/sql"
    var seconds = 10
    var loginConcurrency = 8
    var probePause: Duration = .milliseconds(2)

    init(arguments: [String]) throws {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            guard let value = iterator.next() else { throw UsageError("\(argument) needs a value") }
            switch argument {
            case "--url": databaseURL = value
            case "--sql-dir": sqlDirectory = value
            case "--seconds": seconds = Int(value) ?? seconds
            case "--login-concurrency": loginConcurrency = Int(value) ?? loginConcurrency
            default: throw UsageError("unknown option \(argument)")
            }
        }
        if databaseURL.isEmpty { throw UsageError("--url (the auth role's Postgres URL) is required") }
    }
}

struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Latencies of one phase, in milliseconds.
struct Latencies {
    var samples: [Double] = []

    func percentile(_ fraction: Double) -> Double {
        guard !samples.isEmpty else { return .nan }
        let sorted = samples.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    var summary: String {
        String(
            format: "%6d calls  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms", samples.count, percentile(0.5),
            percentile(0.99), samples.max() ?? .nan)
    }
}

func milliseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1000 + Double(attoseconds) / 1e15
}

/// Calls CheckSession one after another (with a short pause, like a gateway's steady trickle) until `end`.
func probe(
    _ client: Habitflow_Auth_V1_AuthInternal.Client, session: Habitflow_Auth_V1_CheckSessionRequest,
    until end: ContinuousClock.Instant, pause: Duration
) async throws -> Latencies {
    var latencies = Latencies()
    let clock = ContinuousClock()
    while clock.now < end {
        let started = clock.now
        let response = try await client.checkSession(session)
        latencies.samples.append(milliseconds(clock.now - started))
        guard response.state == .active else { throw UsageError("the probe's session is \(response.state)") }
        try await Task.sleep(for: pause)
    }
    return latencies
}

/// Logs in from `concurrency` loops until `end`; returns how many succeeded and their latencies.
func loginLoad(
    _ client: Habitflow_Auth_V1_AuthService.Client, email: String, password: String, concurrency: Int,
    until end: ContinuousClock.Instant
) async throws -> Latencies {
    try await withThrowingTaskGroup(of: Latencies.self) { group in
        for worker in 0..<concurrency {
            group.addTask {
                var latencies = Latencies()
                let clock = ContinuousClock()
                var request = Habitflow_Auth_V1_LoginRequest()
                request.email = email
                request.password = password
                var options = CallOptions(timeout: .seconds(60))
                // Distinct client addresses, as many users behind the gateway: the per-address throttle stays out
                // of the way (no login fails, so per-account throttling never starts).
                options.metadata.add(InternalCredential.Key.clientAddress, "198.18.0.\(worker + 1)")
                while clock.now < end {
                    let started = clock.now
                    _ = try await client.login(request, options: options)
                    latencies.samples.append(milliseconds(clock.now - started))
                }
                return latencies
            }
        }
        var all = Latencies()
        for try await part in group { all.samples += part.samples }
        return all
    }
}

/// How long one bcrypt verification at the production cost takes on one otherwise idle thread: the ceiling of
/// logins per second per core.
func bcryptMilliseconds(samples: Int) async throws -> Latencies {
    let thread = NIOThreadPool(numberOfThreads: 1)
    thread.start()
    let hash = try BCrypt.hash("benchmark password")
    var latencies = Latencies()
    for _ in 0..<samples {
        latencies.samples.append(
            try await thread.runIfActive {
                let started = ContinuousClock.now
                _ = BCrypt.verify("benchmark password", against: hash)
                return milliseconds(ContinuousClock.now - started)
            })
    }
    try await thread.shutdownGracefully()
    return latencies
}

/// The machine's 1-minute load average (other processes share the cores; the figures depend on it).
func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?"
}

/// Starts the service in-process, then measures the three phases and prints them.
func runBenchmark(_ options: Options) async throws {
    var logger = Logger(label: "auth-benchmark")
    // Errors only: the outbox relay retries delivering UserCreated to habits, goals and social, which do not run here.
    logger.logLevel = .error
    let secret = "auth-benchmark-secret"
    var settings = AuthSettings(keyEncryptionKey: (0..<32).map { UInt8($0) })
    settings.maintenanceInterval = nil
    var configuration = ServiceConfiguration(
        service: "auth", port: 0, databaseURL: options.databaseURL, sqlDirectory: options.sqlDirectory,
        internalSecret: secret)
    configuration.logLevel = .error
    configuration.databasePoolSize = 16
    let host = try await ServiceHost.start(
        AuthServiceDefinition.make(settings: settings), configuration: configuration, logger: logger)

    func makeChannel() throws -> RPCChannel {
        try RPCChannel(
            configuration: RPCChannelConfiguration(host: "127.0.0.1", port: host.port),
            interceptors: [
                InternalCredentialClientInterceptor(credential: InternalCredential(secret: secret), caller: "gateway")
            ],
            logger: logger)
    }
    // Separate connections for the probe and the load, as separate gateway replicas would have.
    let probeChannel = try makeChannel()
    let loadChannel = try makeChannel()
    let auth = Habitflow_Auth_V1_AuthService.Client(transport: loadChannel)
    let authInternal = Habitflow_Auth_V1_AuthInternal.Client(transport: probeChannel)

    let email = "bench-\(UUID().uuidString.prefix(8).lowercased())@example.com"
    let password = "benchmark password"
    var register = Habitflow_Auth_V1_RegisterRequest()
    register.email = email
    register.username = "bench_\(UUID().uuidString.prefix(8))"
    register.password = password
    let registered = try await auth.register(register)
    var session = Habitflow_Auth_V1_CheckSessionRequest()
    session.sessionID = registered.tokens.sessionID
    session.userID = registered.user.id

    let clock = ContinuousClock()
    let phase = Duration.seconds(options.seconds)
    // Warm-up: connections, prepared statements, the key cache.
    _ = try await probe(authInternal, session: session, until: clock.now + .seconds(1), pause: options.probePause)
    _ = try await loginLoad(auth, email: email, password: password, concurrency: 2, until: clock.now + .seconds(1))

    let cores = System.coreCount
    print(
        "auth benchmark: \(cores) cores, bcrypt cost \(settings.bcryptCost) on \(cores) hashing threads, "
            + "\(options.seconds) s per phase, load average \(loadAverage()) at start")
    let bcrypt = try await bcryptMilliseconds(samples: 8)
    print(
        String(
            format: "one bcrypt verify (cost 12): p50 %.0f ms on one thread = %.1f logins/s per core at most",
            bcrypt.percentile(0.5), 1000 / bcrypt.percentile(0.5)))

    let loginsAlone = try await loginLoad(
        auth, email: email, password: password, concurrency: options.loginConcurrency, until: clock.now + phase)
    let loginRate = Double(loginsAlone.samples.count) / Double(options.seconds)
    print(
        String(
            format: "logins (%d concurrent):     %7.1f logins/s = %.1f per core; login p50 %.0f ms, p99 %.0f ms",
            options.loginConcurrency, loginRate, loginRate / Double(cores), loginsAlone.percentile(0.5),
            loginsAlone.percentile(0.99)))

    let alone = try await probe(authInternal, session: session, until: clock.now + phase, pause: options.probePause)
    print("CheckSession alone:          \(alone.summary)")

    let end = clock.now + phase
    async let underLoad = probe(authInternal, session: session, until: end, pause: options.probePause)
    async let load = loginLoad(
        auth, email: email, password: password, concurrency: options.loginConcurrency, until: end)
    let (loaded, concurrentLogins) = try await (underLoad, load)
    let concurrentRate = Double(concurrentLogins.samples.count) / Double(options.seconds)
    print(
        "CheckSession during logins:  \(loaded.summary)  (meanwhile \(String(format: "%.1f", concurrentRate)) logins/s)"
    )
    print("load average at the end: \(loadAverage())")

    await probeChannel.close()
    await loadChannel.close()
    await host.shutdown()
}

do {
    try await runBenchmark(try Options(arguments: CommandLine.arguments))
} catch let error as UsageError {
    let usage = "usage: auth-benchmark --url URL [--sql-dir DIR] [--seconds N] [--login-concurrency N]"
    FileHandle.standardError.write(Data("auth-benchmark: \(error)\n\(usage)\n".utf8))
    exit(64)
}
