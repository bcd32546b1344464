import HabitFlowTestSupport
import Foundation
import HabitFlowEvents
import HabitFlowOutbox
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
                    try await PostgresMigrations.migrate(
                        service: service, pool: pool, directory: directory, libraryMigrations: LibraryMigrations.all,
                        logger: testLogger)
                    for name in ["outbox", "outbox_deliveries", "processed_events"] {
                        let table = try await pool.queryRow("SELECT to_regclass(\(name))::text")
                        #expect(try table?.decode(0, as: String?.self) == name, "\(service).\(name)")
                    }
                }
            }
        }

        @Test("a service without a migrations folder gets the libraries' migrations only")
        func missingFolder() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                try await admin.execute("DROP SCHEMA IF EXISTS migration_library_only CASCADE")
                try await admin.execute("CREATE SCHEMA migration_library_only")
                let applied = try await PostgresMigrations.migrate(
                    service: "migration_library_only", pool: admin, directory: "/nonexistent/migration_library_only",
                    libraryMigrations: LibraryMigrations.all, logger: testLogger)
                #expect(
                    applied.map(\.fileName) == [
                        "outbox/0001_tables", "outbox/0002_deliveries", "changes/0001_notify_user_changed",
                        "changes/0002_notify_user_changed_on_delete", "changes/0003_watched_users_only",
                    ])
                let table = try await admin.queryRow(
                    "SELECT to_regclass('migration_library_only.outbox_deliveries')::text")
                #expect(try table?.decode(0, as: String?.self) == "migration_library_only.outbox_deliveries")
            }
        }

        @Test("a schema made by the previous release upgrades: its outbox file's record moves to outbox/0001")
        func upgradeFromServiceOwnedOutbox() async throws {
            let schema = "outbox_upgrade"
            // A role whose unqualified names resolve in its schema, as a service's has.
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                try await admin.execute("DROP SCHEMA IF EXISTS outbox_upgrade CASCADE")
                try await admin.withConnection { connection in
                    try await connection.executeScript(
                        """
                        DO $$ BEGIN
                            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_upgrade') THEN
                                CREATE ROLE outbox_upgrade LOGIN PASSWORD 'outbox-upgrade';
                            END IF;
                        END $$;
                        GRANT CONNECT ON DATABASE habitflow TO outbox_upgrade;
                        """)
                }
                try await admin.execute("CREATE SCHEMA outbox_upgrade AUTHORIZATION outbox_upgrade")
                try await admin.execute("ALTER ROLE outbox_upgrade SET search_path = outbox_upgrade")
            }
            let port = try TestEnvironment.require("HABITFLOW_TEST_POSTGRES_PORT")
            let url = "postgresql://outbox_upgrade:outbox-upgrade@127.0.0.1:\(port)/habitflow"
            try await withPool(url, maximumConnections: 8) { pool in
                // Exactly what the previous release's PostgresMigrations did with 0001 and 0002, bookkeeping included.
                #expect(
                    PostgresMigration.checksum(of: legacyOutboxSQL) == legacyOutboxChecksum, "the fixture is not a copy")
                try await pool.execute(
                    """
                    CREATE TABLE schema_migrations (
                        version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now())
                    """)
                let widgets = "CREATE TABLE widgets (id int8 PRIMARY KEY);\n"
                let previousFiles = [(1, "outbox_and_processed_events", legacyOutboxSQL), (2, "widgets", widgets)]
                for (version, name, sql) in previousFiles {
                    try await pool.withConnection { connection in
                        try await connection.execute("BEGIN")
                        try await connection.execute("SELECT set_config('search_path', \(schema), true)")
                        try await connection.executeScript(sql)
                        try await connection.execute(
                            """
                            INSERT INTO schema_migrations (version, name, checksum) \
                            VALUES (\(version), \(name), \(PostgresMigration.checksum(of: sql)))
                            """)
                        try await connection.execute("COMMIT")
                    }
                }
                // An event the previous relay had already failed to deliver twice.
                let pending = try OutboxEvent(
                    aggregateType: "user", aggregateID: "u1", message: Habitflow_Events_V1_EventEnvelope())
                try await pool.transaction { tx in try await tx.appendToOutbox(pending) }
                try await pool.execute("UPDATE outbox SET attempts = 2, last_error = 'habits was down'")

                let folder = try migrationFolder([
                    "0002_widgets.sql": widgets, "0003_gadgets.sql": "CREATE TABLE gadgets (id int8 PRIMARY KEY);\n",
                ])
                let applied = try await PostgresMigrations.migrate(
                    service: schema, pool: pool, directory: folder, libraryMigrations: LibraryMigrations.all,
                    logger: testLogger)
                #expect(
                    applied.map(\.fileName) == [
                        "outbox/0002_deliveries", "changes/0001_notify_user_changed",
                        "changes/0002_notify_user_changed_on_delete", "changes/0003_watched_users_only",
                        "0003_gadgets.sql",
                    ])
                let recorded = try await pool.query(
                    "SELECT namespace, version, name FROM schema_migrations ORDER BY namespace, version"
                ).map { row in
                    let name = try row.decode(2, as: String.self)
                    return "\(try row.decode(0, as: String.self))/\(try row.decode(1, as: Int.self))_\(name)"
                }
                #expect(
                    recorded == [
                        "/2_widgets", "/3_gadgets", "changes/1_notify_user_changed",
                        "changes/2_notify_user_changed_on_delete", "changes/3_watched_users_only", "outbox/1_tables",
                        "outbox/2_deliveries",
                    ])
                let again = try await PostgresMigrations.migrate(
                    service: schema, pool: pool, directory: folder, libraryMigrations: LibraryMigrations.all,
                    logger: testLogger)
                #expect(again.isEmpty)

                // The outbox works: the old pending event and a new one reach the subscriber, and leave the outbox.
                let received = Shared<[String]>([])
                let relay = OutboxRelay(
                    pool: pool, configuration: .init(schema: schema), routes: ["*": ["sub"]],
                    subscribers: ["sub": RecordingSubscriber(received: received)], logger: testLogger)
                let running = Task { try await relay.run() }
                defer { running.cancel() }
                let fresh = OutboxEvent(type: "t", aggregateType: "user", aggregateID: "u1", payload: Data())
                try await pool.transaction { tx in try await tx.appendToOutbox(fresh) }
                #expect(try await eventually { received.value.count == 2 })
                #expect(received.value == [pending.id, fresh.id].map { $0.uuidString.lowercased() })
                #expect(try await eventually {
                    try await pool.queryRow("SELECT count(*) FROM outbox")!.decode(0, as: Int.self) == 0
                })
                running.cancel()
                _ = await running.result
            }
        }

        @Test("an outbox file applied with an unknown checksum stops the upgrade instead of being taken over")
        func upgradeRefusesAnEditedOutboxFile() async throws {
            try await withPool(try TestEnvironment.superuserURL(), maximumConnections: 1) { admin in
                try await admin.execute("DROP SCHEMA IF EXISTS outbox_edited CASCADE")
                try await admin.execute("CREATE SCHEMA outbox_edited")
                let edited = PostgresMigration(
                    version: 1, name: "outbox_and_processed_events", sql: legacyOutboxSQL + "-- edited\n")
                try await PostgresMigrations.apply([edited], schema: "outbox_edited", pool: admin, logger: testLogger)
                await #expect(throws: PostgresError.self) {
                    try await PostgresMigrations.apply(
                        OutboxMigrations.all, schema: "outbox_edited", pool: admin, logger: testLogger)
                }
            }
        }
    }
}

/// A subscriber that records the event ids it received.
private struct RecordingSubscriber: OutboxSubscriber {
    let received: Shared<[String]>

    func deliver(_ envelope: Habitflow_Events_V1_EventEnvelope) async throws {
        received.update { $0.append(envelope.id) }
    }
}

/// `Schemas/sql/<service>/0001_outbox_and_processed_events.sql` as every service had it before the outbox owned its
/// tables (`OutboxMigrations`), byte for byte.
private let legacyOutboxChecksum = "a00a476693cd4c878f759ffe0e91106ba8bf2043ba9ce5af3feabbca996c9b14"
private let legacyOutboxSQL = """
-- Transactional outbox: events this service publishes, appended in the same transaction as the change they
-- describe and delivered at least once, in order per aggregate, by the outbox relay (HabitFlowOutbox).
CREATE TABLE outbox (
    sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id uuid NOT NULL UNIQUE,
    aggregate_type text NOT NULL,
    aggregate_id text NOT NULL,
    event_type text NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    payload bytea NOT NULL,
    -- Delivery bookkeeping: failed attempts so far and when to try again (exponential backoff).
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text
);

-- Wakes the relay (LISTEN habitflow_outbox_<schema>) when the appending transaction commits, so delivery is prompt
-- without polling. Once per statement; Postgres folds identical notifications of one transaction into one.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('habitflow_outbox_' || TG_TABLE_SCHEMA, '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- Inbox: ids of events this service's consumers have processed, recorded in the transaction that applied the
-- event, so a redelivered event is recognised and skipped.
CREATE TABLE processed_events (
    consumer text NOT NULL,
    event_id uuid NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

"""
