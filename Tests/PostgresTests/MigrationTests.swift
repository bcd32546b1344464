import HabitFlowTestSupport
import Foundation
import HabitFlowPostgres
import Testing

/// A throwaway folder of migration files.
private func migrationFolder(_ files: [String: String]) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for (name, sql) in files { try sql.write(to: folder.appendingPathComponent(name), atomically: true, encoding: .utf8) }
    return folder.path
}

extension PostgresIntegrationTests {
    @Suite("migrations")
    struct MigrationTests {
        let files = [
            "0001_create_items.sql": "CREATE TABLE items (id int8 PRIMARY KEY, name text NOT NULL);\n",
            "0002_seed.sql": "INSERT INTO items VALUES (1, 'first');\nCREATE INDEX items_name ON items (name);\n",
            "0003_counter.sql": "CREATE TABLE applied_counter (n int);\nINSERT INTO applied_counter VALUES (1);\n",
        ]

        @Test("five instances starting at once apply each migration exactly once")
        func concurrentStartUp() async throws {
            let folder = try migrationFolder(files)
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                try await admin.execute("DROP SCHEMA IF EXISTS migration_probe CASCADE")
                try await admin.execute("CREATE SCHEMA migration_probe")
            }
            let migrations = try PostgresMigrations.load(directory: folder)
            #expect(migrations.map(\.version) == [1, 2, 3])
            let appliedCounts = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        // One pool per "replica", as separate service processes would have.
                        try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                            try await PostgresMigrations.apply(migrations, schema: "migration_probe", pool: pool, logger: testLogger).count
                        }
                    }
                }
                var counts: [Int] = []
                for try await count in group { counts.append(count) }
                return counts.sorted()
            }
            #expect(appliedCounts == [0, 0, 0, 0, 3])
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                let recorded = try await admin.query("SELECT version FROM migration_probe.schema_migrations ORDER BY version")
                #expect(try recorded.map { try $0.decode(0, as: Int.self) } == [1, 2, 3])
                let counter = try await admin.queryRow("SELECT count(*) FROM migration_probe.applied_counter")
                #expect(try counter?.decode(0, as: Int.self) == 1)
                // Objects landed in the target schema, not in public.
                let items = try await admin.queryRow("SELECT name FROM migration_probe.items WHERE id = 1")
                #expect(try items?.decode(0, as: String.self) == "first")
            }
            // Running again is a no-op.
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { pool in
                let again = try await PostgresMigrations.apply(migrations, schema: "migration_probe", pool: pool, logger: testLogger)
                #expect(again.isEmpty)
            }
        }

        @Test("an applied migration file that changed stops start-up; a failing one is rolled back")
        func changedFile() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                try await admin.execute("DROP SCHEMA IF EXISTS migration_changed CASCADE")
                try await admin.execute("CREATE SCHEMA migration_changed")
                let original = try PostgresMigrations.load(directory: try migrationFolder(files))
                try await PostgresMigrations.apply(original, schema: "migration_changed", pool: admin, logger: testLogger)

                var edited = files
                edited["0002_seed.sql"] = "INSERT INTO items VALUES (1, 'edited');\n"
                let changed = try PostgresMigrations.load(directory: try migrationFolder(edited))
                await #expect {
                    try await PostgresMigrations.apply(changed, schema: "migration_changed", pool: admin, logger: testLogger)
                } throws: { error in
                    let error = error as? PostgresError
                    return error?.kind == .migrationFailed && error?.message.contains("0002_seed.sql") == true
                }

                var broken = files
                broken["0004_broken.sql"] = "CREATE TABLE half_done (id int);\nSELECT * FROM missing_table;\n"
                let withBroken = try PostgresMigrations.load(directory: try migrationFolder(broken))
                await #expect {
                    try await PostgresMigrations.apply(withBroken, schema: "migration_changed", pool: admin, logger: testLogger)
                } throws: { ($0 as? PostgresError)?.kind == .migrationFailed }
                let halfDone = try await admin.queryRow("SELECT to_regclass('migration_changed.half_done')::text")
                #expect(try halfDone?.decode(0, as: String?.self) == nil)
            }
        }

        @Test("bad file names are refused")
        func badFileName() throws {
            let folder = try migrationFolder(["create.sql": "SELECT 1;"])
            #expect(throws: PostgresError.self) { try PostgresMigrations.load(directory: folder) }
        }

        @Test("the services' own migrations apply as their roles")
        func serviceMigrations() async throws {
            for service in ["auth", "habits", "goals", "social"] {
                let directory = (TestEnvironment.sqlRoot as NSString).appendingPathComponent(service)
                try await withPool(try TestEnvironment.serviceURL(service), maximumConnections: 1) { pool in
                    try await PostgresMigrations.migrate(service: service, pool: pool, directory: directory, logger: testLogger)
                    let table = try await pool.queryRow("SELECT to_regclass('outbox')::text")
                    #expect(try table?.decode(0, as: String?.self) == "outbox")
                }
            }
        }
    }
}
