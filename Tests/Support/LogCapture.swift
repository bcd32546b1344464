public import Logging

/// A log handler that keeps what is logged, for tests of what code logs.
///
/// ```swift
/// let records = LogCapture()
/// let logger = Logger(label: "test") { _ in records }
/// ```
public struct LogCapture: LogHandler {
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: String
        /// The event's metadata (the handler's own merged in), values as text.
        public var metadata: [String: String]
    }

    private let storage = Shared<[Entry]>([])
    public var entries: [Entry] { storage.value }
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init() {}

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }.mapValues { "\($0)" }
        storage.update { $0.append(Entry(level: event.level, message: "\(event.message)", metadata: merged)) }
    }
}
