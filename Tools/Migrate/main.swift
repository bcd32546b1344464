// habitflow-migrate: applies a service's SQL migrations (the libraries', then Schemas/sql/<service>/NNNN_name.sql) to
// its schema and exits, without starting the service. Safe to run while replicas start: they all serialize on an advisory lock.
//
//   habitflow-migrate --service NAME --database-url URL [--sql-dir DIR]
//
// DIR holds one folder per service (default $HABITFLOW_SQL_DIR, else Schemas/sql). The URL should be the service
// role's (its search_path is its schema); the superuser's works too, the migrations still land in schema NAME.
import Foundation
import HabitFlowOutbox
import HabitFlowPostgres
import Logging

let usage = "usage: habitflow-migrate --service NAME --database-url URL [--sql-dir DIR]"

func fail(_ message: String, status: Int32 = 64) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(status)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard ["--service", "--database-url", "--sql-dir"].contains(argument), let value = arguments.popFirst() else {
        fail(argument == "--help" ? usage : "unexpected argument \(argument)\n\(usage)", status: argument == "--help" ? 0 : 64)
    }
    options[argument] = value
}
guard let service = options["--service"], let databaseURL = options["--database-url"] else { fail(usage) }

LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
let logger = Logger(label: "habitflow-migrate")

var environment = ProcessInfo.processInfo.environment
if let sqlDirectory = options["--sql-dir"] { environment["HABITFLOW_SQL_DIR"] = sqlDirectory }
let directory = PostgresMigrations.directory(forService: service, environment: environment)

var configuration = PostgresPool.Configuration(connectionString: databaseURL)
configuration.maximumConnections = 1
let pool = PostgresPool(configuration: configuration, logger: logger)
do {
    let applied = try await PostgresMigrations.migrate(
        service: service, pool: pool, directory: directory, libraryMigrations: LibraryMigrations.all, logger: logger)
    await pool.shutdown()
    print(applied.isEmpty ? "\(service): up to date" : "\(service): applied \(applied.map(\.fileName).joined(separator: ", "))")
} catch {
    await pool.shutdown()
    fail("\(service): \(error)", status: 1)
}
