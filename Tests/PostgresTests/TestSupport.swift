import Foundation
import HabitFlowPostgres
import Logging
import Synchronization
import Testing

/// Every suite that talks to the test Postgres nests in this one, so they run one at a time: one of them restarts
/// the server.
@Suite("Postgres integration (test cluster from scripts/test)", .serialized)
struct PostgresIntegrationTests {}

enum TestEnvironment {
    static func require(_ name: String) throws -> String {
        try #require(
            ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 },
            "\(name) is not set: run the tests through scripts/test, which starts a test Postgres and sets it")
    }

    /// The superuser URL (database habitflow).
    static func superuserURL() throws -> String { try require("HABITFLOW_TEST_POSTGRES_URL") }

    /// A service role's URL (its search_path is its schema).
    static func serviceURL(_ service: String) throws -> String {
        try require("HABITFLOW_TEST_\(service.uppercased())_DATABASE_URL")
    }

    /// `Schemas/sql`: `$HABITFLOW_SQL_DIR` (set by scripts/test), else found from this file's path.
    static var sqlRoot: String {
        if let root = ProcessInfo.processInfo.environment["HABITFLOW_SQL_DIR"], !root.isEmpty { return root }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Schemas/sql").path
    }
}

let testLogger: Logger = {
    var logger = Logger(label: "postgres-tests")
    logger.logLevel = .warning
    return logger
}()

func makePool(_ url: String, maximumConnections: Int = 4, acquireTimeout: Duration = .seconds(10)) -> PostgresPool {
    var configuration = PostgresPool.Configuration(connectionString: url)
    configuration.maximumConnections = maximumConnections
    configuration.acquireTimeout = acquireTimeout
    return PostgresPool(configuration: configuration, logger: testLogger)
}

/// Runs `body` with a pool and always shuts the pool down.
@discardableResult
func withPool<Result>(
    _ url: String, maximumConnections: Int = 4, acquireTimeout: Duration = .seconds(10),
    _ body: (PostgresPool) async throws -> Result
) async throws -> Result {
    let pool = makePool(url, maximumConnections: maximumConnections, acquireTimeout: acquireTimeout)
    do {
        let result = try await body(pool)
        await pool.shutdown()
        return result
    } catch {
        await pool.shutdown()
        throw error
    }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// A value shared between tasks (a `Mutex` cannot be captured by a task's closure itself).
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }
    @discardableResult
    func update<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}
