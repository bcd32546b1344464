public import Foundation
internal import HabitFlowCrypto
public import Logging

/// One migration: a service's file `NNNN_name.sql`, or a library's embedded SQL (`outbox/0001_tables`).
public struct PostgresMigration: Sendable, Hashable {
    /// Whose migration it is: `""` for the service's own files, a library's name (`"outbox"`) for SQL a library
    /// embeds. Versions count per namespace, so a library's migrations never take a number from the service's files.
    public var namespace: String
    public var version: Int
    public var name: String
    public var sql: String
    /// Lowercase hex SHA-256 of the file's bytes.
    public var checksum: String
    /// Service files this migration took over (see ``Predecessor``).
    public var predecessors: [Predecessor]

    /// A service file whose SQL moved into a library migration. Where it is recorded as applied (same version, name
    /// and one of the known checksums), the library migration counts as applied instead of running: its record
    /// takes the file's place. An unknown checksum stops start-up, as an edited applied file would.
    public struct Predecessor: Sendable, Hashable {
        public var version: Int
        public var name: String
        public var checksums: Set<String>

        public init(version: Int, name: String, checksums: Set<String>) {
            self.version = version
            self.name = name
            self.checksums = checksums
        }
    }

    /// `NNNN_name.sql` for a service file, `namespace/NNNN_name` for a library's.
    public var fileName: String {
        let stem = "\(String(version).leftPadded(to: 4))_\(name)"
        return namespace.isEmpty ? "\(stem).sql" : "\(namespace)/\(stem)"
    }

    public init(namespace: String = "", version: Int, name: String, sql: String, predecessors: [Predecessor] = []) {
        self.namespace = namespace
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = Self.checksum(of: sql)
        self.predecessors = predecessors
    }

    /// What ``checksum`` holds for `sql`.
    public static func checksum(of sql: String) -> String {
        SHA256.hash(Array(sql.utf8)).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

/// Plain-SQL migrations per service schema, applied at start-up.
///
/// Files live in `<sql root>/<service>/NNNN_name.sql` and are read at run time, so the native stack, the tests and
/// the compose image use the same files. The SQL root is `$HABITFLOW_SQL_DIR`, by default `Schemas/sql` relative to
/// the working directory. Libraries that own tables in every service's schema (the outbox) pass their migrations
/// along; they run first, each namespace in the order given. Each migration runs in its own transaction with
/// `search_path` set to the service's schema (so it must not contain `BEGIN`/`COMMIT`, nor statements that cannot
/// run in a transaction), and is recorded in `schema_migrations(namespace, version, ...)` in that schema with its
/// checksum. An applied migration whose checksum changed stops start-up. Replicas starting together serialize on a
/// Postgres advisory lock: the first applies, the others find it done.
public enum PostgresMigrations {
    /// `$HABITFLOW_SQL_DIR/<service>`, or `Schemas/sql/<service>` when it is not set.
    public static func directory(
        forService service: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        let root = environment["HABITFLOW_SQL_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "Schemas/sql"
        return (root as NSString).appendingPathComponent(service)
    }

    /// Reads the migration files of a folder, in version order.
    public static func load(directory: String) throws(PostgresError) -> [PostgresMigration] {
        let fileNames: [String]
        do {
            fileNames = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw PostgresError(kind: .migrationFailed, message: "cannot read migrations folder \(directory): \(error)")
        }
        var migrations: [PostgresMigration] = []
        for fileName in fileNames.sorted() where fileName.hasSuffix(".sql") {
            let stem = fileName.dropLast(4)
            guard let separator = stem.firstIndex(of: "_"), let version = Int(stem[..<separator]), version > 0,
                stem[..<separator].allSatisfy(\.isASCII)
            else {
                throw PostgresError(kind: .migrationFailed, message: "\(fileName): expected NNNN_name.sql")
            }
            let path = (directory as NSString).appendingPathComponent(fileName)
            guard let data = FileManager.default.contents(atPath: path), let sql = String(data: data, encoding: .utf8)
            else { throw PostgresError(kind: .migrationFailed, message: "cannot read \(path) as UTF-8") }
            if let previous = migrations.last, previous.version == version {
                throw PostgresError(kind: .migrationFailed, message: "two migrations have version \(version)")
            }
            migrations.append(PostgresMigration(version: version, name: String(stem[stem.index(after: separator)...]), sql: sql))
        }
        return migrations.sorted { $0.version < $1.version }
    }

    /// Loads `<sql root>/<service>` and applies `libraryMigrations`, then those files, to the schema named like the
    /// service. A missing folder is a service without tables of its own (only the libraries').
    @discardableResult
    public static func migrate(
        service: String, pool: PostgresPool, directory: String? = nil, libraryMigrations: [PostgresMigration] = [],
        logger: Logger
    ) async throws -> [PostgresMigration] {
        let directory = directory ?? Self.directory(forService: service)
        let files: [PostgresMigration]
        if FileManager.default.fileExists(atPath: directory) {
            files = try load(directory: directory)
        } else {
            logger.notice(
                "no migrations folder: only the libraries' migrations apply", metadata: ["folder": "\(directory)"])
            files = []
        }
        return try await apply(libraryMigrations + files, schema: service, pool: pool, logger: logger)
    }

    /// Applies the migrations not yet recorded in `<schema>.schema_migrations`, in the order given, under an advisory
    /// lock.
    ///
    /// - Returns: the migrations this call applied (empty when another replica already did; a migration that took
    ///   over a predecessor's record is not listed: it did not run).
    /// - Throws: ``PostgresError/Kind/migrationFailed`` when an applied migration's SQL changed, or two migrations
    ///   share a namespace and version.
    @discardableResult
    public static func apply(
        _ migrations: [PostgresMigration], schema: String, pool: PostgresPool, logger: Logger
    ) async throws -> [PostgresMigration] {
        var keys: Set<MigrationKey> = []
        for migration in migrations where !keys.insert(MigrationKey(migration)).inserted {
            throw PostgresError(kind: .migrationFailed, message: "two migrations are \(migration.fileName)")
        }
        let lockKey = advisoryLockKey(schema: schema)
        return try await pool.withConnection { connection in
            // Session-level: held across the per-file transactions; released on unlock or when the session ends.
            try await connection.execute("SELECT pg_advisory_lock(\(lockKey))")
            do {
                let applied = try await applyLocked(migrations, schema: schema, connection: connection, logger: logger)
                try await connection.execute("SELECT pg_advisory_unlock(\(lockKey))")
                return applied
            } catch {
                _ = try? await connection.execute("SELECT pg_advisory_unlock(\(lockKey))")
                throw error
            }
        }
    }

    private struct MigrationKey: Hashable {
        var namespace: String
        var version: Int

        init(namespace: String, version: Int) {
            self.namespace = namespace
            self.version = version
        }

        init(_ migration: PostgresMigration) {
            self.init(namespace: migration.namespace, version: migration.version)
        }
    }

    static func advisoryLockKey(schema: String) -> Int64 {
        PostgresConnection.advisoryLockKey(named: "habitflow.migrations.\(schema)")
    }

    private static func applyLocked(
        _ migrations: [PostgresMigration], schema: String, connection: PostgresConnection, logger: Logger
    ) async throws -> [PostgresMigration] {
        let recorded = try await inTransaction(connection, schema: schema) {
            try await connection.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    namespace text NOT NULL DEFAULT '',
                    version integer NOT NULL,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (namespace, version)
                )
                """)
            // Tables made before libraries had migrations: one namespace, keyed by version alone.
            try await connection.executeScript(
                """
                DO $$
                BEGIN
                    IF NOT EXISTS (SELECT FROM pg_attribute
                                   WHERE attrelid = 'schema_migrations'::regclass AND attname = 'namespace') THEN
                        ALTER TABLE schema_migrations ADD COLUMN namespace text NOT NULL DEFAULT '',
                            DROP CONSTRAINT schema_migrations_pkey, ADD PRIMARY KEY (namespace, version);
                    END IF;
                END
                $$
                """)
            return try await connection.query(
                "SELECT namespace, version, name, checksum FROM schema_migrations ORDER BY namespace, version")
        }
        var appliedChecksums: [MigrationKey: (name: String, checksum: String)] = [:]
        for row in recorded {
            let key = MigrationKey(namespace: try row.decode(0), version: try row.decode(1, as: Int.self))
            appliedChecksums[key] = (try row.decode(2), try row.decode(3))
        }
        for migration in migrations where appliedChecksums[MigrationKey(migration)] == nil {
            for predecessor in migration.predecessors {
                let key = MigrationKey(namespace: "", version: predecessor.version)
                guard let applied = appliedChecksums[key], applied.name == predecessor.name else { continue }
                guard predecessor.checksums.contains(applied.checksum) else {
                    throw PostgresError(
                        kind: .migrationFailed,
                        message: "\(schema)/\(String(predecessor.version).leftPadded(to: 4))_\(predecessor.name)"
                            + ".sql was applied with checksum \(applied.checksum.prefix(12))…, which "
                            + "\(migration.fileName) does not know: it cannot take that file's place")
                }
                // The record moves (keeping when it was applied): the tables are there, the file no longer is.
                _ = try await inTransaction(connection, schema: schema) {
                    try await connection.execute(
                        """
                        UPDATE schema_migrations SET namespace = \(migration.namespace), \
                        version = \(migration.version), name = \(migration.name), checksum = \(migration.checksum) \
                        WHERE namespace = '' AND version = \(predecessor.version)
                        """)
                }
                appliedChecksums[key] = nil
                appliedChecksums[MigrationKey(migration)] = (migration.name, migration.checksum)
                logger.info(
                    "migration took over an applied file",
                    metadata: ["schema": "\(schema)", "migration": "\(migration.fileName)", "file": "\(applied.name)"])
                break
            }
        }
        let byKey = Dictionary(uniqueKeysWithValues: migrations.map { (MigrationKey($0), $0) })
        let sortedApplied = appliedChecksums.sorted {
            ($0.key.namespace, $0.key.version) < ($1.key.namespace, $1.key.version)
        }
        for (key, applied) in sortedApplied {
            guard let file = byKey[key] else {
                // A newer release may have added it; an older replica still runs fine against the newer schema.
                logger.warning(
                    "applied migration has no file",
                    metadata: ["schema": "\(schema)", "namespace": "\(key.namespace)", "version": "\(key.version)"])
                continue
            }
            guard file.checksum == applied.checksum, file.name == applied.name else {
                throw PostgresError(
                    kind: .migrationFailed,
                    message: "\(schema)/\(file.fileName) changed after it was applied (recorded \(applied.name), "
                        + "checksum \(applied.checksum.prefix(12))…, file has \(file.checksum.prefix(12))…): "
                        + "add a new migration instead of editing an applied one")
            }
        }
        var newlyApplied: [PostgresMigration] = []
        for migration in migrations where appliedChecksums[MigrationKey(migration)] == nil {
            let started = ContinuousClock.now
            do {
                try await inTransaction(connection, schema: schema) {
                    try await connection.executeScript(migration.sql)
                    try await connection.execute(
                        """
                        INSERT INTO schema_migrations (namespace, version, name, checksum) \
                        VALUES (\(migration.namespace), \(migration.version), \(migration.name), \(migration.checksum))
                        """)
                }
            } catch let error as PostgresError {
                throw PostgresError(
                    kind: .migrationFailed, sqlState: error.sqlState,
                    message: "\(schema)/\(migration.fileName) failed: \(error.message)", constraint: error.constraint)
            }
            logger.info(
                "applied migration",
                metadata: [
                    "schema": "\(schema)", "migration": "\(migration.fileName)",
                    "duration": "\(ContinuousClock.now - started)",
                ])
            newlyApplied.append(migration)
        }
        return newlyApplied
    }

    /// A transaction whose unqualified names resolve in `schema` (set locally, so the session is left as it was).
    private static func inTransaction<Result>(
        _ connection: PostgresConnection, schema: String, _ body: () async throws -> Result
    ) async throws -> Result {
        try await connection.execute("BEGIN")
        do {
            try await connection.execute("SELECT set_config('search_path', \(schema), true)")
            let result = try await body()
            try await connection.execute("COMMIT")
            return result
        } catch {
            _ = try? await connection.execute("ROLLBACK")
            throw error
        }
    }
}
