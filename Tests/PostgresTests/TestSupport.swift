import Foundation
import HabitFlowTestSupport
import HabitFlowPostgres
import Logging
import Synchronization
import Testing

/// Every suite that talks to the test Postgres nests in this one, so they run one at a time: one of them restarts
/// the server.
@Suite("Postgres integration (test cluster from scripts/test)", .serialized)
struct PostgresIntegrationTests {}

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
