internal import Foundation
internal import HabitFlowLocking

/// What scripts/test sets up for the tests: the test Postgres (superuser and one role per service) and the SQL folder.
public enum TestEnvironment {
    public struct Missing: Error, CustomStringConvertible {
        public let variable: String
        public var description: String {
            "\(variable) is not set: run the tests through scripts/test, which starts a test Postgres and sets it"
        }
    }

    public static func require(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { throw Missing(variable: name) }
        return value
    }

    /// The superuser URL (database habitflow).
    public static func superuserURL() throws -> String { try require("HABITFLOW_TEST_POSTGRES_URL") }

    /// A service role's URL (its search_path is its schema; it can touch nothing else).
    public static func serviceURL(_ service: String) throws -> String {
        try require("HABITFLOW_TEST_\(service.uppercased())_DATABASE_URL")
    }

    /// `Schemas/sql`: `$HABITFLOW_SQL_DIR` (set by scripts/test), else found from this file's path.
    public static var sqlRoot: String {
        if let root = ProcessInfo.processInfo.environment["HABITFLOW_SQL_DIR"], !root.isEmpty { return root }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Schemas/sql").path
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns its last answer.
public func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// A value shared between tasks (a `Locked` cannot be captured by a task's closure itself).
public final class Shared<Value: Sendable>: Sendable {
    private let mutex: Locked<Value>
    public init(_ value: Value) { mutex = Locked(value) }
    public var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }
    @discardableResult
    public func update<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}
