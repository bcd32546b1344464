import Foundation
import HabitFlowPostgres
import Testing

/// The throwaway cluster `scripts/test` starts; see `scripts/lib/postgres.sh`.
func testDatabaseURL() throws -> String {
    try #require(
        ProcessInfo.processInfo.environment["HABITFLOW_TEST_POSTGRES_URL"],
        "HABITFLOW_TEST_POSTGRES_URL is not set: run the tests through scripts/test, which starts a test Postgres")
}

@Suite("libpq against the test Postgres")
struct PostgresConnectionTests {
    @Test("connects and runs a parameterized query")
    func parameterizedQuery() throws {
        let connection = try PostgresConnection(try testDatabaseURL())
        #expect(connection.serverVersion >= 150_000)

        let rows = try connection.query("SELECT $1::int + $2::int AS sum, $3::text IS NULL AS missing", ["40", "2", nil])
        #expect(rows.columns == ["sum", "missing"])
        #expect(rows.rows == [["42", "t"]])
    }

    @Test("parameters stay values: SQL in a parameter is never executed")
    func parametersAreNotSQL() throws {
        let connection = try PostgresConnection(try testDatabaseURL())
        let table = "foundation_\(UInt32.random(in: 0...UInt32.max))"
        try connection.query("CREATE TEMP TABLE \(table) (name text PRIMARY KEY)")
        let hostile = "x'); DROP TABLE \(table); --"
        try connection.query("INSERT INTO \(table) (name) VALUES ($1)", [hostile])
        let rows = try connection.query("SELECT name FROM \(table)")
        #expect(rows.rows == [[hostile]])
    }

    @Test("errors carry their SQLSTATE as a typed kind")
    func typedErrors() throws {
        let connection = try PostgresConnection(try testDatabaseURL())
        try connection.query("CREATE TEMP TABLE unique_names (name text PRIMARY KEY)")
        try connection.query("INSERT INTO unique_names VALUES ($1)", ["a"])
        #expect {
            try connection.query("INSERT INTO unique_names VALUES ($1)", ["a"])
        } throws: { error in
            let error = error as? PostgresError
            return error?.kind == .uniqueViolation && error?.sqlState == "23505" && error?.constraint == "unique_names_pkey"
        }
        #expect {
            try connection.query("SELEC 1")
        } throws: { ($0 as? PostgresError)?.kind == .syntaxError }
    }

    @Test("a wrong password is a connection error, not a crash")
    func badCredentials() throws {
        var components = try #require(URLComponents(string: try testDatabaseURL()))
        components.password = "wrong-password"
        #expect {
            try PostgresConnection(components.string!)
        } throws: { ($0 as? PostgresError)?.kind == .connectionFailed }
    }
}

@Suite("per-service roles and schemas")
struct ServiceRoleTests {
    func serviceURL(_ service: String) throws -> String {
        try #require(
            ProcessInfo.processInfo.environment["HABITFLOW_TEST_\(service.uppercased())_DATABASE_URL"],
            "run the tests through scripts/test, which creates the service roles")
    }

    @Test("a service role works in its own schema by default")
    func ownSchema() throws {
        let auth = try PostgresConnection(try serviceURL("auth"))
        let table = "role_probe_\(UInt32.random(in: 0...UInt32.max))"
        try auth.query("CREATE TABLE \(table) (id int PRIMARY KEY)")
        defer { _ = try? auth.query("DROP TABLE \(table)") }
        let schema = try auth.query("SELECT table_schema FROM information_schema.tables WHERE table_name = $1", [table])
        #expect(schema.rows == [["auth"]])
    }

    @Test("the habits role cannot read or write the auth schema, nor create in public")
    func isolation() throws {
        let auth = try PostgresConnection(try serviceURL("auth"))
        let table = "secrets_\(UInt32.random(in: 0...UInt32.max))"
        try auth.query("CREATE TABLE \(table) (token text)")
        defer { _ = try? auth.query("DROP TABLE \(table)") }
        try auth.query("INSERT INTO \(table) VALUES ($1)", ["s3cret"])

        let habits = try PostgresConnection(try serviceURL("habits"))
        #expect {
            try habits.query("SELECT token FROM auth.\(table)")
        } throws: { ($0 as? PostgresError)?.kind == .insufficientPrivilege }
        #expect {
            try habits.query("CREATE TABLE public.intruder (id int)")
        } throws: { ($0 as? PostgresError)?.kind == .insufficientPrivilege }
    }
}
