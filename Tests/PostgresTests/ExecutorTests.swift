import HabitFlowTestSupport
import Foundation
import HabitFlowHTTP2
import HabitFlowPostgres
import HabitFlowRPC
import NIOPosix
import Synchronization
import Testing

extension PostgresIntegrationTests {
    @Suite("statements and executors")
    struct ExecutorTests {
        @Test("a task preferring the pool's executor continues on the poller thread, waits included")
        func poolExecutor() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 2) { pool in
                let threads = try await Task(executorPreference: pool.taskExecutor) {
                    var threads: [String] = []
                    // A new connection and a first statement (connect and prepare on the pool's threads), then the
                    // prepared path, a script, a transaction and a typed error.
                    #expect(try await pool.queryRow("SELECT \(Int64(7))::int8")?.decode(0, as: Int64.self) == 7)
                    threads.append(currentThreadName())
                    #expect(try await pool.queryRow("SELECT \(Int64(8))::int8")?.decode(0, as: Int64.self) == 8)
                    threads.append(currentThreadName())
                    try await pool.withConnection { connection in try await connection.executeScript("SELECT 1; SELECT 2") }
                    threads.append(currentThreadName())
                    let sum = try await pool.transaction { tx in
                        try await tx.queryRow("SELECT \(Int64(2)) + \(Int64(3))")?.decode(0, as: Int64.self)
                    }
                    #expect(sum == 5)
                    threads.append(currentThreadName())
                    await #expect {
                        try await pool.query("SELECT \("a\u{0}b")::text")
                    } throws: { ($0 as? PostgresError)?.kind == .invalidParameter }
                    threads.append(currentThreadName())
                    // More tasks than connections: some wait in acquire and are resumed by another task's release.
                    try await withThrowingTaskGroup(of: String.self) { group in
                        for value in 0..<16 {
                            group.addTask {
                                _ = try await pool.queryRow("SELECT \(Int64(value)), pg_sleep(0.01)")
                                return currentThreadName()
                            }
                        }
                        for try await thread in group { threads.append(thread) }
                    }
                    return threads
                }.value
                #expect(threads.count == 21)
                #expect(threads.allSatisfy { $0.hasPrefix("hf-pg-poller-") }, "\(Set(threads))")
            }
        }

        @Test("many tasks preferring the pool's executor run on several pollers, each getting its own rows")
        func severalPollers() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 8) { pool in
                let threads = try await withThrowingTaskGroup(of: Set<String>.self) { group in
                    for task in 0..<48 {
                        group.addTask(executorPreference: pool.taskExecutor) {
                            var threads: Set<String> = []
                            for step in 0..<25 {
                                let value = Int64(task * 1_000 + step)
                                let row = try #require(
                                    try await pool.queryRow("SELECT \(value)::int8, \("task \(task) step \(step)")::text"))
                                #expect(try row.decode(0, as: Int64.self) == value)
                                #expect(try row.decode(1, as: String.self) == "task \(task) step \(step)")
                                threads.insert(currentThreadName())
                            }
                            return threads
                        }
                    }
                    return try await group.reduce(into: Set<String>()) { $0.formUnion($1) }
                }
                // Eight connections opened one after another are bound to the pollers in turn, and a task continues on
                // the poller that read its answer.
                #expect(threads.allSatisfy { $0.hasPrefix("hf-pg-poller-") }, "\(threads)")
                #expect(threads.count >= 2, "\(threads)")
            }
        }

        @Test("requests and answers larger than one write or read go through whole on the pollers")
        func largeRequestsAndAnswers() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 2) { pool in
                try await Task(executorPreference: pool.taskExecutor) {
                    let large = String(repeating: "habit ", count: 1_000_000)
                    // The first run of each statement prepares it the blocking way; the later ones take the pollers.
                    for _ in 0..<3 {
                        // Megabytes to send: the socket takes them in parts, flushed as it drains.
                        #expect(try await pool.queryRow("SELECT length(\(large))")?.decode(0, as: Int32.self) == 6_000_000)
                        // Megabytes and thousands of rows to read: libpq reads them in many parts.
                        let text = try await pool.queryRow("SELECT repeat(\("x"), \(Int32(3_000_000)))")?
                            .decode(0, as: String.self)
                        #expect(text?.utf8.count == 3_000_000)
                        let rows = try await pool.query("SELECT n, md5(n::text) FROM generate_series(1, \(Int32(20_000))) AS n")
                        #expect(rows.count == 20_000)
                        #expect(try rows.last?.decode(0, as: Int32.self) == 20_000)
                    }
                }.value
            }
        }

        @Test("a connection whose server process ended while it sat idle is reopened before its next statement")
        func hungUpWhileIdle() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                try await Task(executorPreference: pool.taskExecutor) {
                    // The second run takes the non-blocking path, so the socket is in its poller's epoll set.
                    var pid: Int32 = 0
                    for _ in 0..<2 {
                        pid = try #require(try await pool.queryRow("SELECT pg_backend_pid()")?.decode(0, as: Int32.self))
                    }
                    try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                        _ = try await admin.query("SELECT pg_terminate_backend(\(pid))")
                    }
                    try await Task.sleep(for: .milliseconds(100))
                    // No error: the poller saw the idle socket become readable, so the lease checked and reconnected.
                    for _ in 0..<3 {
                        let newPID = try await pool.queryRow("SELECT pg_backend_pid()")?.decode(0, as: Int32.self)
                        #expect(newPID != nil && newPID != pid)
                    }
                }.value
            }
        }

        @Test("a statement's blocking work (first run, waiting for the server) never holds up the poller thread")
        func blockingWorkStaysOffThePoller() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { slowPool in
                try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { quickPool in
                    _ = try await quickPool.query("SELECT \(Int64(0))::int8")
                    let slowFinished = Shared(false)
                    // The slow statement's first run prepares and executes it with libpq's blocking calls.
                    let slow = Task(executorPreference: slowPool.taskExecutor) {
                        try await slowPool.execute("SELECT pg_sleep(1.5)")
                        slowFinished.value = true
                    }
                    try await Task.sleep(for: .milliseconds(100))
                    try await Task(executorPreference: quickPool.taskExecutor) {
                        for value in 1...10 { _ = try await quickPool.query("SELECT \(Int64(value))::int8") }
                    }.value
                    #expect(!slowFinished.value)
                    try await slow.value
                }
            }
        }

        @Test("a task preferring an event loop continues on that loop after each statement")
        func eventLoopExecutor() async throws {
            let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let loop = loops.next()
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                let onLoop = try await Task(executorPreference: EventLoopTaskExecutor(eventLoop: loop)) {
                    var onLoop: [Bool] = []
                    for value in 0..<3 {
                        _ = try await pool.queryRow("SELECT \(Int64(value))::int8")
                        onLoop.append(loop.inEventLoop)
                    }
                    return onLoop
                }.value
                #expect(onLoop == [true, true, true])
            }
            try await loops.shutdownGracefully()
        }
    }
}

/// The name the system shows for the current thread.
private func currentThreadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
}
