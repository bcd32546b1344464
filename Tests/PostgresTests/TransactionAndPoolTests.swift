import HabitFlowTestSupport
import Foundation
import HabitFlowPostgres
import Synchronization
import Testing

private struct Boom: Error {}

extension PostgresIntegrationTests {
    @Suite("transactions")
    struct TransactionTests {
        @Test("commits on return, rolls back on throw, savepoints undo only their part")
        func commitAndRollback() async throws {
            try await withPool(try TestEnvironment.serviceURL("goals"), maximumConnections: 2) { pool in
                try await pool.execute("DROP TABLE IF EXISTS tx_probe")
                try await pool.execute("CREATE TABLE tx_probe (id int8 PRIMARY KEY, note text)")

                try await pool.transaction { tx in
                    try await tx.execute("INSERT INTO tx_probe VALUES (\(1), \("committed"))")
                }
                await #expect(throws: Boom.self) {
                    try await pool.transaction { tx in
                        try await tx.execute("INSERT INTO tx_probe VALUES (\(2), \("rolled back"))")
                        throw Boom()
                    }
                }
                // A failed statement aborts the transaction; the error surfaces and nothing is kept.
                await #expect {
                    try await pool.transaction { tx in
                        try await tx.execute("INSERT INTO tx_probe VALUES (\(3), \("lost"))")
                        try await tx.execute("INSERT INTO tx_probe VALUES (\(1), \("duplicate"))")
                    }
                } throws: { ($0 as? PostgresError)?.kind == .uniqueViolation }
                try await pool.transaction { tx in
                    try await tx.execute("INSERT INTO tx_probe VALUES (\(4), \("outer"))")
                    _ = try? await tx.savepoint { inner in
                        try await inner.execute("INSERT INTO tx_probe VALUES (\(5), \("inner"))")
                        try await inner.execute("INSERT INTO tx_probe VALUES (\(4), \("duplicate"))")
                    }
                    try await tx.execute("INSERT INTO tx_probe VALUES (\(6), \("after savepoint"))")
                }
                let ids = try await pool.query("SELECT id FROM tx_probe ORDER BY id").map { try $0.decode(0, as: Int64.self) }
                #expect(ids == [1, 4, 6])
                try await pool.execute("DROP TABLE tx_probe")
            }
        }

        @Test("serialization failures are retried until the transaction commits")
        func retryOnSerializationFailure() async throws {
            try await withPool(try TestEnvironment.serviceURL("goals"), maximumConnections: 4) { pool in
                try await pool.execute("DROP TABLE IF EXISTS tx_counter")
                try await pool.execute("CREATE TABLE tx_counter (id int PRIMARY KEY, value int8 NOT NULL)")
                try await pool.execute("INSERT INTO tx_counter VALUES (1, 0)")
                let attempts = Shared(0)
                // Read-modify-write in SERIALIZABLE from 4 tasks at once: conflicts are certain, lost updates not.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 {
                        group.addTask {
                            for _ in 0..<5 {
                                try await pool.retryingTransaction(maximumAttempts: 50) { tx in
                                    attempts.update { $0 += 1 }
                                    let value = try await tx.queryRow("SELECT value FROM tx_counter WHERE id = 1")!
                                        .decode(0, as: Int64.self)
                                    try await Task.sleep(for: .milliseconds(2))
                                    try await tx.execute("UPDATE tx_counter SET value = \(value + 1) WHERE id = 1")
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let value = try await pool.queryRow("SELECT value FROM tx_counter WHERE id = 1")?.decode(0, as: Int64.self)
                #expect(value == 20)
                #expect(attempts.value > 20, "expected some serialization failures to be retried")
                try await pool.execute("DROP TABLE tx_counter")
            }
        }
    }

    @Suite("connection pool")
    struct PoolTests {
        @Test("acquire waits for a free connection and times out when none frees up")
        func boundedWithTimeout() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 2, acquireTimeout: .milliseconds(300)) {
                pool in
                // 8 concurrent sleepers on 2 connections: never more than 2 backends at once.
                let started = ContinuousClock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 { group.addTask { try await pool.execute("SELECT pg_sleep(0.05)") } }
                    try await group.waitForAll()
                }
                #expect(ContinuousClock.now - started >= .milliseconds(100))
                try await pool.withConnection { _ in
                    try await pool.withConnection { _ in
                        await #expect {
                            try await pool.query("SELECT 1")
                        } throws: { ($0 as? PostgresError)?.kind == .poolTimeout }
                    }
                }
                #expect(try await pool.queryRow("SELECT 1::int8")?.decode(0, as: Int.self) == 1)
            }
        }

        @Test("every waiter times out at its own deadline, and one granted in time is never failed")
        func waitersTimeOutOneByOne() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1, acquireTimeout: .milliseconds(400)) {
                pool in
                try await pool.withConnection { _ in
                    // Two waiters 200 ms apart on a pool whose only connection stays leased: each fails after its
                    // own 400 ms, so the second fails about 200 ms after the first (one shared timer, re-armed).
                    let clock = ContinuousClock()
                    let start = clock.now
                    async let first: Duration = {
                        await #expect { try await pool.query("SELECT 1") } throws: {
                            ($0 as? PostgresError)?.kind == .poolTimeout
                        }
                        return clock.now - start
                    }()
                    try await Task.sleep(for: .milliseconds(200))
                    async let second: Duration = {
                        await #expect { try await pool.query("SELECT 1") } throws: {
                            ($0 as? PostgresError)?.kind == .poolTimeout
                        }
                        return clock.now - start
                    }()
                    let (firstFailed, secondFailed) = await (first, second)
                    #expect(firstFailed >= .milliseconds(400))
                    #expect(secondFailed >= .milliseconds(600))
                }
                // A waiter whose connection frees up before its deadline gets it, even while the timer is armed.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await pool.execute("SELECT pg_sleep(0.3)") }
                    try await Task.sleep(for: .milliseconds(50))
                    group.addTask {
                        let value = try await pool.queryRow("SELECT 2::int8")?.decode(0, as: Int.self)
                        #expect(value == 2)
                    }
                    try await group.waitForAll()
                }
            }
        }

        @Test("a connection the server killed is replaced transparently")
        func terminatedBackend() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                let pid = try #require(try await pool.queryRow("SELECT pg_backend_pid()")?.decode(0, as: Int32.self))
                try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                    _ = try await admin.query("SELECT pg_terminate_backend(\(pid))")
                }
                try await Task.sleep(for: .milliseconds(100))
                let newPID = try await pool.queryRow("SELECT pg_backend_pid()")?.decode(0, as: Int32.self)
                #expect(newPID != nil && newPID != pid)
            }
        }

        @Test("a connection lost inside a transaction fails it: no silent reconnect, nothing half-committed")
        func lostInsideTransaction() async throws {
            try await withPool(try TestEnvironment.serviceURL("goals"), maximumConnections: 1) { pool in
                try await pool.execute("DROP TABLE IF EXISTS tx_lost")
                try await pool.execute("CREATE TABLE tx_lost (id int8)")
                await #expect {
                    try await pool.transaction { tx in
                        try await tx.execute("INSERT INTO tx_lost VALUES (\(1))")
                        let pid = try await tx.queryRow("SELECT pg_backend_pid()")!.decode(0, as: Int32.self)
                        try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                            _ = try await admin.query("SELECT pg_terminate_backend(\(pid))")
                        }
                        try await Task.sleep(for: .milliseconds(100))
                        try await tx.execute("INSERT INTO tx_lost VALUES (\(2))")
                    }
                } throws: { ($0 as? PostgresError)?.kind == .connectionLost }
                #expect(try await pool.queryRow("SELECT count(*) FROM tx_lost")?.decode(0, as: Int.self) == 0)
                try await pool.execute("DROP TABLE tx_lost")
            }
        }

        @Test("the pool recovers after a Postgres restart in the middle of use")
        func serverRestart() async throws {
            let dataDirectory = try TestEnvironment.require("HABITFLOW_TEST_POSTGRES_DATA_DIR")
            let pgCtl = try TestEnvironment.require("HABITFLOW_TEST_PG_CTL")
            let logFile = try TestEnvironment.require("HABITFLOW_TEST_POSTGRES_LOG")
            try await withPool(try TestEnvironment.serviceURL("habits"), maximumConnections: 4) { pool in
                // Open all four connections.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 { group.addTask { try await pool.execute("SELECT pg_sleep(0.02)") } }
                    try await group.waitForAll()
                }
                // Load while the server restarts: statements in flight may fail with a connection error, nothing else.
                let stop = Shared(false)
                let unexpected = Shared<[String]>([])
                // One task with no executor preference, one continuing on the pollers (whose sockets the restart
                // replaces under them).
                let loads = [nil, pool.taskExecutor].map { executor in
                    Task(executorPreference: executor) {
                        while !stop.value {
                            do {
                                _ = try await pool.query("SELECT 1")
                            } catch let error as PostgresError
                                where [.connectionLost, .connectionFailed].contains(error.kind)
                            {
                                try? await Task.sleep(for: .milliseconds(20))
                            } catch {
                                unexpected.update { $0.append("\(error)") }
                            }
                        }
                    }
                }
                let command = "\(pgCtl) restart --pgdata=\(dataDirectory) --log=\(logFile) --mode=fast --wait --timeout=60 >/dev/null"
                let status = await runOnOwnThread { system(command) }
                #expect(status == 0, "pg_ctl restart failed: \(command)")
                try await Task.sleep(for: .milliseconds(200))
                stop.value = true
                for load in loads { await load.value }
                #expect(unexpected.value == [])

                // After the restart every pooled connection works again, without restarting anything, for tasks on
                // the pollers and elsewhere alike.
                for executor in [nil, pool.taskExecutor] {
                    try await withThrowingTaskGroup(of: Int.self) { group in
                        for _ in 0..<16 {
                            group.addTask(executorPreference: executor) {
                                var sum = 0
                                for _ in 0..<5 { sum += try await pool.queryRow("SELECT 1::int8")!.decode(0, as: Int.self) }
                                return sum
                            }
                        }
                        var sum = 0
                        for try await five in group { sum += five }
                        #expect(sum == 80)
                    }
                }
                let schema = try await pool.transaction { tx in
                    try await tx.queryRow("SELECT current_schema()")?.decode(0, as: String.self)
                }
                #expect(schema == "habits")
            }
        }
    }
}

/// Runs blocking work on a new thread (not the cooperative pool, which the load above keeps busy).
private func runOnOwnThread(_ body: @escaping @Sendable () -> Int32) async -> Int32 {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}
