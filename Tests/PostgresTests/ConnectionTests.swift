import HabitFlowTestSupport
import Foundation
import HabitFlowPostgres
import Testing

extension PostgresIntegrationTests {
    @Suite("queries against the test Postgres")
    struct ConnectionTests {
        @Test("connects and runs a parameterized query")
        func parameterizedQuery() async throws {
            try await withPool(try TestEnvironment.superuserURL()) { pool in
                let version = try await pool.withConnection { $0.serverVersion }
                #expect(version >= 150_000)
                let row = try #require(
                    try await pool.queryRow("SELECT \(40) + \(2) AS sum, \(nil as String?)::text IS NULL AS missing"))
                #expect(row.columns.map(\.name) == ["sum", "missing"])
                #expect(try row.decode("sum", as: Int.self) == 42)
                #expect(try row.decode(1, as: Bool.self))
            }
        }

        @Test("interpolated values become $n parameters, never SQL text")
        func interpolationBinds() {
            let name = "x'); DROP TABLE t; --"
            let query: PostgresQuery = "SELECT * FROM t WHERE name = \(name) AND id = \(7)"
            #expect(query.sql == "SELECT * FROM t WHERE name = $1 AND id = $2")
            #expect(query.binds.count == 2)
        }

        @Test("parameters stay values: SQL in a parameter is never executed")
        func parametersAreNotSQL() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                try await pool.withConnection { connection in
                    try await connection.execute("CREATE TEMP TABLE foundation_names (name text PRIMARY KEY)")
                    let hostile = "x'); DROP TABLE foundation_names; --"
                    try await connection.execute("INSERT INTO foundation_names (name) VALUES (\(hostile))")
                    let rows = try await connection.query("SELECT name FROM foundation_names")
                    #expect(try rows.map { try $0.decode(0, as: String.self) } == [hostile])
                }
            }
        }

        @Test("a prepared statement's answers keep their columns; a table change that would alter them fails instead")
        func preparedStatementColumns() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                try await pool.withConnection { connection in
                    try await connection.execute("CREATE TEMP TABLE shapes (id int8 PRIMARY KEY, label text)")
                    try await connection.execute("INSERT INTO shapes VALUES (\(Int64(1)), \("circle")), (\(Int64(2)), \(nil as String?))")
                    // The first run prepares the statement; the later ones reuse the columns its answer left there.
                    for (id, label) in [(Int64(1), "circle"), (2, nil), (1, "circle")] {
                        let row = try #require(try await connection.queryRow("SELECT * FROM shapes WHERE id = \(id)"))
                        #expect(row.columns.map(\.name) == ["id", "label"])
                        #expect(row.columns.map(\.type) == [.int8, .text])
                        #expect(try row.decode("id", as: Int64.self) == id)
                        #expect(try row.decode("label", as: String?.self) == label)
                    }
                    try await connection.execute("ALTER TABLE shapes RENAME COLUMN label TO name")
                    // Postgres refuses to change a prepared statement's result, so no answer arrives with stale names.
                    await #expect {
                        try await connection.queryRow("SELECT * FROM shapes WHERE id = \(Int64(1))")
                    } throws: { error in
                        (error as? PostgresError)?.message.contains("cached plan must not change result type") == true
                    }
                }
            }
        }

        @Test("prepared statements run their generic plan, not one planned per call, also after the connection was re-opened")
        func genericPlans() async throws {
            // `= ANY($1)` is the case Postgres's default plan choice re-plans on every call (the array's length is
            // unknown to the generic plan, so it always looks dearer).
            func runAndCountPlans(_ pool: PostgresPool) async throws -> (generic: Int, custom: Int) {
                try await pool.withConnection { connection in
                    for round in 0..<8 {
                        let ids = (0...round).map { Int64($0) }
                        let rows = try await connection.query(
                            "SELECT id FROM plan_ids WHERE id = ANY(\(ids)) ORDER BY id")
                        #expect(try rows.map { try $0.decode(0, as: Int64.self) } == ids)
                    }
                    let row = try #require(try await connection.queryRow(
                        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE \("%FROM plan_ids WHERE id = ANY%")"))
                    return (try row.decode(0, as: Int.self), try row.decode(1, as: Int.self))
                }
            }
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                try await pool.execute("DROP TABLE IF EXISTS plan_ids")
                try await pool.execute("CREATE TABLE plan_ids AS SELECT generate_series(0, 999)::int8 AS id")
                try await pool.execute("CREATE INDEX ON plan_ids (id)")
                try await pool.execute("ANALYZE plan_ids")
                let plans = try await runAndCountPlans(pool)
                #expect(plans.custom == 0 && plans.generic == 8, "plans: \(plans)")
                // The setting is a connection option, so a connection re-opened with PQreset has it too.
                let pid = try #require(try await pool.queryRow("SELECT pg_backend_pid()")?.decode(0, as: Int32.self))
                try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                    _ = try await admin.query("SELECT pg_terminate_backend(\(pid))")
                }
                try await Task.sleep(for: .milliseconds(100))
                let afterReset = try await runAndCountPlans(pool)
                #expect(afterReset.custom == 0 && afterReset.generic == 8, "plans after the reset: \(afterReset)")
                try await pool.execute("DROP TABLE plan_ids")
            }
        }

        @Test("errors carry their SQLSTATE as a typed kind")
        func typedErrors() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                try await pool.withConnection { connection in
                    try await connection.execute("CREATE TEMP TABLE unique_names (name text PRIMARY KEY, n int CHECK (n > 0))")
                    try await connection.execute("INSERT INTO unique_names VALUES (\("a"), \(Int32(1)))")
                    await #expect {
                        try await connection.execute("INSERT INTO unique_names VALUES (\("a"), \(Int32(1)))")
                    } throws: { error in
                        let error = error as? PostgresError
                        return error?.kind == .uniqueViolation && error?.sqlState == "23505"
                            && error?.constraint == "unique_names_pkey"
                    }
                    await #expect {
                        try await connection.execute("INSERT INTO unique_names VALUES (\("b"), \(Int32(-1)))")
                    } throws: { ($0 as? PostgresError)?.kind == .checkViolation }
                    await #expect {
                        try await connection.execute("SELEC 1")
                    } throws: { ($0 as? PostgresError)?.kind == .syntaxError }
                    // The session is still usable after errors.
                    #expect(try await connection.queryRow("SELECT 1::int8")?.decode(0, as: Int.self) == 1)
                }
            }
        }

        /// A statement outside a transaction block commits at the Sync after it, once its rows and CommandComplete
        /// are sent: a failure at that commit (here a deferred constraint trigger; in production, the server going
        /// away while the commit waits for its WAL flush) must fail the statement, not lose the write behind an answer.
        @Test("a write whose commit fails is an error, though its rows came first")
        func commitFailureAfterRows() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                try await pool.withConnection { connection in
                    try await connection.execute("CREATE TEMP TABLE commits (id int8 PRIMARY KEY, ok bool NOT NULL)")
                    try await connection.execute(
                        """
                        CREATE FUNCTION pg_temp.refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS \
                        $$ BEGIN IF NOT NEW.ok THEN RAISE EXCEPTION 'refused at commit'; END IF; RETURN NULL; END $$
                        """)
                    try await connection.execute(
                        """
                        CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON commits DEFERRABLE INITIALLY DEFERRED \
                        FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_at_commit()
                        """)
                    func insert(_ id: Int64, ok: Bool) async throws -> Int64? {
                        try await connection.queryRow(
                            "INSERT INTO commits (id, ok) VALUES (\(id), \(ok)) RETURNING id")?.decode(0, as: Int64.self)
                    }
                    // The first run prepares the statement (and waits on the pool's threads); the next ones are sent
                    // and read without blocking, which is where a result came back before its commit had happened.
                    #expect(try await insert(1, ok: true) == 1)
                    #expect(try await insert(2, ok: true) == 2)
                    await #expect {
                        try await insert(3, ok: false)
                    } throws: { ($0 as? PostgresError)?.message.contains("refused at commit") == true }
                    #expect(try await insert(4, ok: true) == 4)
                    let stored = try await connection.query("SELECT id FROM commits ORDER BY id")
                    #expect(try stored.map { try $0.decode(0, as: Int64.self) } == [1, 2, 4])
                }
            }
        }

        @Test("text with a NUL character is refused before it is sent")
        func nulInText() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                await #expect {
                    try await pool.query("SELECT \("a\u{0}b")::text")
                } throws: { ($0 as? PostgresError)?.kind == .invalidParameter }
            }
        }

        @Test("a wrong password is a connection error, not a crash")
        func badCredentials() async throws {
            var components = try #require(URLComponents(string: try TestEnvironment.superuserURL()))
            components.password = "wrong-password"
            try await withPool(components.string!, maximumConnections: 1) { pool in
                await #expect {
                    try await pool.query("SELECT 1")
                } throws: { ($0 as? PostgresError)?.kind == .connectionFailed }
            }
        }
    }

    @Suite("per-service roles and schemas")
    struct ServiceRoleTests {
        @Test("a service role works in its own schema by default")
        func ownSchema() async throws {
            try await withPool(try TestEnvironment.serviceURL("auth"), maximumConnections: 1) { pool in
                try await pool.execute("DROP TABLE IF EXISTS role_probe")
                try await pool.execute("CREATE TABLE role_probe (id int PRIMARY KEY)")
                let schema = try await pool.queryRow(
                    "SELECT table_schema FROM information_schema.tables WHERE table_name = \("role_probe")")
                #expect(try schema?.decode(0, as: String.self) == "auth")
                try await pool.execute("DROP TABLE role_probe")
            }
        }

        @Test("the habits role cannot read or write the auth schema, nor create in public")
        func isolation() async throws {
            try await withPool(try TestEnvironment.serviceURL("auth"), maximumConnections: 1) { auth in
                try await auth.execute("CREATE TABLE IF NOT EXISTS role_probe_secrets (token text)")
                try await auth.execute("INSERT INTO role_probe_secrets VALUES (\("s3cret"))")
                try await withPool(try TestEnvironment.serviceURL("habits"), maximumConnections: 1) { habits in
                    await #expect {
                        try await habits.query("SELECT token FROM auth.role_probe_secrets")
                    } throws: { ($0 as? PostgresError)?.kind == .insufficientPrivilege }
                    await #expect {
                        try await habits.execute("INSERT INTO auth.role_probe_secrets VALUES (\("x"))")
                    } throws: { ($0 as? PostgresError)?.kind == .insufficientPrivilege }
                    await #expect {
                        try await habits.execute("CREATE TABLE public.intruder (id int)")
                    } throws: { ($0 as? PostgresError)?.kind == .insufficientPrivilege }
                }
                try await auth.execute("DROP TABLE role_probe_secrets")
            }
        }
    }
}
