public import Logging

/// A transaction's isolation level.
public enum PostgresIsolationLevel: Sendable {
    case readCommitted
    case repeatableRead
    case serializable

    var beginStatement: PostgresQuery {
        switch self {
        case .readCommitted: "BEGIN ISOLATION LEVEL READ COMMITTED"
        case .repeatableRead: "BEGIN ISOLATION LEVEL REPEATABLE READ"
        case .serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE"
        }
    }
}

/// Statements inside an open transaction. Do not let it escape the transaction's closure.
public struct PostgresTransaction: PostgresQueryable {
    let connection: PostgresConnection

    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await connection.query(query)
    }

    /// Runs `body` inside a savepoint: its statements are undone if it throws, and the transaction goes on.
    public func savepoint<Result>(_ body: (PostgresTransaction) async throws -> Result) async throws -> Result {
        // One fixed name: nested savepoints may share it, ROLLBACK TO and RELEASE pick the most recent.
        try await execute("SAVEPOINT habitflow_savepoint")
        do {
            let result = try await body(self)
            try await execute("RELEASE SAVEPOINT habitflow_savepoint")
            return result
        } catch {
            _ = try? await execute("ROLLBACK TO SAVEPOINT habitflow_savepoint")
            _ = try? await execute("RELEASE SAVEPOINT habitflow_savepoint")
            throw error
        }
    }
}

@available(*, unavailable)
extension PostgresTransaction: Sendable {}

extension PostgresPool {
    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws (or the task is cancelled).
    @discardableResult
    public func transaction<Result>(
        isolation: PostgresIsolationLevel = .readCommitted,
        _ body: (PostgresTransaction) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in
            try await connection.execute(isolation.beginStatement)
            let transaction = PostgresTransaction(connection: connection)
            let result: Result
            do {
                result = try await body(transaction)
            } catch {
                // The pool also rolls back a connection returned inside a transaction, should this fail.
                _ = try? await connection.execute("ROLLBACK")
                throw error
            }
            try await connection.execute("COMMIT")
            return result
        }
    }

    /// Like ``transaction(isolation:_:)``, but runs the whole transaction again after a serialization failure
    /// (SQLSTATE 40001) or a deadlock (40P01), up to `maximumAttempts` times, with a short jittered exponential
    /// backoff (about 5 ms, 10 ms, 20 ms, ... capped at 500 ms). `body` must be safe to run more than once.
    @discardableResult
    public func retryingTransaction<Result>(
        isolation: PostgresIsolationLevel = .serializable,
        maximumAttempts: Int = 5,
        _ body: (PostgresTransaction) async throws -> Result
    ) async throws -> Result {
        try await withTransactionRetry(maximumAttempts: maximumAttempts, logger: logger) {
            try await transaction(isolation: isolation, body)
        }
    }
}

/// Runs `operation` again after serialization failures and deadlocks, with jittered exponential backoff.
public func withTransactionRetry<Result>(
    maximumAttempts: Int = 5,
    logger: Logger,
    _ operation: () async throws -> Result
) async throws -> Result {
    var attempt = 1
    while true {
        do {
            return try await operation()
        } catch let error as PostgresError where error.isRetryableTransactionFailure && attempt < maximumAttempts {
            let base = min(5.0 * Double(1 << (attempt - 1)), 500.0)
            let delay = Duration.milliseconds(Double.random(in: base / 2...base * 1.5))
            logger.debug(
                "retrying a transaction", metadata: ["attempt": "\(attempt)", "sqlstate": "\(error.sqlState ?? "")"])
            try await Task.sleep(for: delay)
            attempt += 1
        }
    }
}
