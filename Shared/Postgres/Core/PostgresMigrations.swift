public import Foundation
internal import HabitFlowCrypto
public import Logging

/// One migration file, `NNNN_name.sql`.
public struct PostgresMigration: Sendable, Hashable {
    public var version: Int
    public var name: String
    public var sql: String
    /// Lowercase hex SHA-256 of the file's bytes.
    public var checksum: String

    public var fileName: String { "\(String(version).leftPadded(to: 4))_\(name).sql" }

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = SHA256.hash(Array(sql.utf8)).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

/// Plain-SQL migrations per service schema, applied at start-up.
///
/// Files live in `<sql root>/<service>/NNNN_name.sql` and are read at run time, so the native stack, the tests and
/// the compose image use the same files. The SQL root is `$HABITFLOW_SQL_DIR`, by default `Schemas/sql` relative to
/// the working directory. Each file runs in its own transaction with `search_path` set to the service's schema
/// (so it must not contain `BEGIN`/`COMMIT`, nor statements that cannot run in a transaction), and is recorded in
/// `schema_migrations` in that schema with its checksum. An applied file whose checksum changed stops start-up.
/// Replicas starting together serialize on a Postgres advisory lock: the first applies, the others find it done.
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

    /// Loads `<sql root>/<service>` and applies it to the schema named like the service.
    @discardableResult
    public static func migrate(
        service: String, pool: PostgresPool, directory: String? = nil, logger: Logger
    ) async throws -> [PostgresMigration] {
        let migrations = try load(directory: directory ?? Self.directory(forService: service))
        return try await apply(migrations, schema: service, pool: pool, logger: logger)
    }

    /// Applies the migrations not yet recorded in `<schema>.schema_migrations`, in order, under an advisory lock.
    ///
    /// - Returns: the migrations this call applied (empty when another replica already did).
    /// - Throws: ``PostgresError/Kind/migrationFailed`` when an applied migration's file changed.
    @discardableResult
    public static func apply(
        _ migrations: [PostgresMigration], schema: String, pool: PostgresPool, logger: Logger
    ) async throws -> [PostgresMigration] {
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

    static func advisoryLockKey(schema: String) -> Int64 {
        let digest = SHA256.hash(Array("habitflow.migrations.\(schema)".utf8))
        return digest.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }

    private static func applyLocked(
        _ migrations: [PostgresMigration], schema: String, connection: PostgresConnection, logger: Logger
    ) async throws -> [PostgresMigration] {
        let recorded = try await inTransaction(connection, schema: schema) {
            try await connection.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
            return try await connection.query("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        }
        var appliedChecksums: [Int: (name: String, checksum: String)] = [:]
        for row in recorded {
            appliedChecksums[try row.decode(0, as: Int.self)] = (try row.decode(1), try row.decode(2))
        }
        let byVersion = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for (version, applied) in appliedChecksums.sorted(by: { $0.key < $1.key }) {
            guard let file = byVersion[version] else {
                // A newer release may have added it; an older replica still runs fine against the newer schema.
                logger.warning("applied migration has no file", metadata: ["schema": "\(schema)", "version": "\(version)"])
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
        for migration in migrations where appliedChecksums[migration.version] == nil {
            let started = ContinuousClock.now
            do {
                try await inTransaction(connection, schema: schema) {
                    try await connection.executeScript(migration.sql)
                    try await connection.execute(
                        """
                        INSERT INTO schema_migrations (version, name, checksum) \
                        VALUES (\(migration.version), \(migration.name), \(migration.checksum))
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
