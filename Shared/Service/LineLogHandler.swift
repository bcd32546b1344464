internal import Dispatch
internal import HabitFlowLocking
public import Logging

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The log handler of every HabitFlow process: swift-log's `StreamLogHandler` line format, unchanged
/// (`<time> <level> <label>: <key>=<value> … [<source>] <message>`, keys sorted), written to standard error.
///
/// Cheaper per line than `StreamLogHandler`, which mattered for the gateway's access log (one line per call, 9% of
/// the gateway's CPU time): the line is assembled in one string, the timestamp is formatted once per second rather
/// than per line, and lines go out in batches (see ``LineOutput``). A line whose metadata comes as ``LogLineFields``
/// (``Logger/log(level:_:fields:source:file:function:line:)``) skips the dictionary, the sort and the string: it is
/// written straight into the batch.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    public var metadata: Logger.Metadata = [:]

    private let label: String
    private let output: LineOutput

    /// Lines to standard error (what ``ServiceMain`` bootstraps); info and debug lines are batched: for up to 10 ms
    /// while lines keep coming, up to 100 ms after the last one.
    public static func standardError(label: String) -> LineLogHandler {
        LineLogHandler(label: label, output: standardErrorOutput)
    }

    /// Writes the standard-error lines still waiting for their batch (before the process exits).
    public static func flushStandardError() {
        standardErrorOutput.flush()
    }

    private static let standardErrorOutput = LineOutput(fileDescriptor: 2, batchingDelay: .milliseconds(10))

    init(label: String, output: LineOutput, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.output = output
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The line `log(event:)` writes for `fields` as the event's metadata, written straight into the batch: the
    /// handler's metadata (sorted once per line, usually there is none) merged into the fields, which come in key
    /// order already (the fields win a key both have).
    func log(
        level: Logger.Level, _ message: Logger.Message, fields: some LogLineFields, source: String?, file: String,
        function: String, line: UInt
    ) {
        guard metadataProvider == nil else {
            // The provider's metadata is new on every line: merge it the general way (none of our processes sets one).
            log(
                event: LogEvent(
                    level: level, message: message, error: nil, metadata: fields.metadata, source: source, file: file,
                    function: function, line: line))
            return
        }
        let handlerMetadata = metadata.isEmpty ? [] : metadata.sorted { $0.key < $1.key }
        let timestamp = output.clock.timestamp()
        output.write(level: level) { bytes in
            Self.appendHead(to: &bytes, timestamp: timestamp, level: level, label: label)
            var nextHandlerField = handlerMetadata.startIndex
            fields.forEachField { key, value in
                while nextHandlerField < handlerMetadata.endIndex && handlerMetadata[nextHandlerField].key <= key {
                    let (handlerKey, handlerValue) = handlerMetadata[nextHandlerField]
                    if handlerKey != key { Self.appendField(to: &bytes, key: handlerKey, value: handlerValue) }
                    nextHandlerField += 1
                }
                Self.appendField(to: &bytes, key: key, text: value)
            }
            for (key, value) in handlerMetadata[nextHandlerField...] {
                Self.appendField(to: &bytes, key: key, value: value)
            }
            if var source {
                source.withUTF8 { Self.appendTail(to: &bytes, source: $0, message: message) }
                return
            }
            // swift-log's default source: the module, from `#fileID` (`Module/File.swift`).
            var file = file
            file.withUTF8 { file in
                if let slash = file.firstIndex(of: UInt8(ascii: "/")) {
                    Self.appendTail(to: &bytes, source: UnsafeBufferPointer(rebasing: file[..<slash]), message: message)
                } else {
                    ("n/a" as StaticString).withUTF8Buffer {
                        Self.appendTail(to: &bytes, source: $0, message: message)
                    }
                }
            }
        }
    }

    public func log(event: LogEvent) {
        output.write(
            Self.line(
                timestamp: output.clock.timestamp(), level: event.level, label: label,
                metadata: effectiveMetadata(event), source: event.source, message: event.message),
            level: event.level)
    }

    /// The handler's metadata, the provider's, then the event's (later ones win), and the event's error.
    private func effectiveMetadata(_ event: LogEvent) -> Logger.Metadata {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { $1 }
        }
        if let explicit = event.metadata, !explicit.isEmpty {
            if merged.isEmpty { merged = explicit } else { merged.merge(explicit) { $1 } }
        }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return merged
    }

    /// One line, newline included, as `StreamLogHandler` writes it.
    static func line(
        timestamp: String, level: Logger.Level, label: String, metadata: Logger.Metadata, source: String,
        message: Logger.Message
    ) -> String {
        var line: [UInt8] = []
        line.reserveCapacity(128 + metadata.count * 48)
        appendHead(to: &line, timestamp: timestamp, level: level, label: label)
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            appendField(to: &line, key: key, value: value)
        }
        var source = source
        source.withUTF8 { appendTail(to: &line, source: $0, message: message) }
        return String(decoding: line, as: UTF8.self)
    }

    /// `<timestamp> <level> <label>:`
    private static func appendHead(to line: inout [UInt8], timestamp: String, level: Logger.Level, label: String) {
        line.appendUTF8(timestamp)
        line.append(UInt8(ascii: " "))
        line.appendUTF8(level.rawValue)
        if !label.isEmpty {
            line.append(UInt8(ascii: " "))
            line.appendUTF8(label)
        }
        line.append(UInt8(ascii: ":"))
    }

    /// ` <key>=<value>`
    private static func appendField(to line: inout [UInt8], key: String, value: Logger.Metadata.Value) {
        if case .string(let text) = value {
            appendField(to: &line, key: key, text: text)
        } else {
            appendField(to: &line, key: key, text: value.description)
        }
    }

    private static func appendField(to line: inout [UInt8], key: String, text: String) {
        line.append(UInt8(ascii: " "))
        line.appendUTF8(key)
        line.append(UInt8(ascii: "="))
        line.appendUTF8(text)
    }

    /// ` [<source>] <message>` and the newline.
    private static func appendTail(
        to line: inout [UInt8], source: UnsafeBufferPointer<UInt8>, message: Logger.Message
    ) {
        line.append(UInt8(ascii: " "))
        line.append(UInt8(ascii: "["))
        line.append(contentsOf: source)
        line.append(UInt8(ascii: "]"))
        line.append(UInt8(ascii: " "))
        line.appendUTF8(message.description)
        line.append(UInt8(ascii: "\n"))
    }
}

extension [UInt8] {
    /// `append(contentsOf: text.utf8)` as one copy (the sequence-by-sequence path showed in the gateway's profile).
    mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }
}

/// A log line's metadata as fields in key order, for a line logged often: ``LineLogHandler`` writes them straight
/// into its batch, with no `Logger.Metadata` dictionary, no sort and no intermediate string (the gateway's access
/// log line per call). Any other handler gets them as ``metadata``; the line is the same either way.
public protocol LogLineFields {
    /// Calls `field` for each field, keys in ascending order (`String`'s `<`, as the line sorts them), each key once.
    func forEachField(_ field: (_ key: String, _ value: String) -> Void)
}

extension LogLineFields {
    /// The fields as swift-log metadata.
    public var metadata: Logger.Metadata {
        var metadata: Logger.Metadata = [:]
        forEachField { key, value in metadata[key] = .string(value) }
        return metadata
    }
}

extension Logger {
    /// Logs `message` with `fields` as its metadata, as `log(level:_:metadata:source:file:function:line:)` would,
    /// without building the metadata when the handler is a ``LineLogHandler``.
    ///
    /// The logger's level, the handler's metadata and its metadata provider apply as to any line; `fields` is not
    /// evaluated when the level filters the line out.
    public func log(
        level: Logger.Level, _ message: Logger.Message, fields: @autoclosure () -> some LogLineFields,
        source: String? = nil, file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        guard logLevel <= level else { return }
        if let lineHandler = handler as? LineLogHandler {
            lineHandler.log(
                level: level, message, fields: fields(), source: source, file: file, function: function, line: line)
        } else {
            log(
                level: level, message, metadata: fields().metadata, source: source, file: file, function: function,
                line: line)
        }
    }
}

/// Where a ``LineLogHandler`` writes: a file descriptor, with `write(2)` (retried until everything is out).
///
/// Lines below `notice` are batched: the gateway's access log is a line per call, and a `write` per line was a
/// sizeable share of its CPU time per call. While lines keep coming, a batch goes out with the first line logged once
/// the batch is `batchingDelay` old, on the thread logging it. When logging stops, a timer writes what is left within
/// `idleFlushDelay`. (A timer per batch, as before, cost the gateway about 3% of its CPU at 100 batches a second:
/// Dispatch's timer thread waking a worker thread for each; now the timer runs at most once per `idleFlushDelay`.)
/// A `notice` or more severe line goes out at once, with every line before it, and so does a batch grown past 64 KiB;
/// ``flush()`` (``ServiceMain`` calls it before the process exits) writes what is waiting. Lines keep their order.
final class LineOutput: Sendable {
    private struct State {
        var pending: [UInt8] = []
        /// When the first of the pending lines was logged (``monotonicNanoseconds()``).
        var batchStarted: UInt64 = 0
        var idleFlushScheduled = false
    }

    private let fileDescriptor: Int32
    /// In nanoseconds, as ``monotonicNanoseconds()`` counts.
    private let batchingDelay: UInt64?
    private let idleFlushDelay: DispatchTimeInterval
    private let state = Locked(State())
    private static let maximumPendingBytes = 64 * 1024
    let clock = LogTimestampClock()

    /// - Parameters:
    ///   - batchingDelay: how long a line may wait for the lines after it while logging goes on; `nil` writes every
    ///     line at once.
    ///   - idleFlushDelay: how long a line may wait when no line follows it (at least `batchingDelay`).
    init(fileDescriptor: Int32, batchingDelay: Duration?, idleFlushDelay: Duration = .milliseconds(100)) {
        self.fileDescriptor = fileDescriptor
        self.batchingDelay = batchingDelay.map { UInt64(Self.nanoseconds($0)) }
        self.idleFlushDelay = .nanoseconds(Self.nanoseconds(max(idleFlushDelay, batchingDelay ?? .zero)))
    }

    func write(_ line: String, level: Logger.Level) {
        write(level: level) { $0.appendUTF8(line) }
    }

    /// Writes a line that `append` adds to the pending bytes, under the lock (so without a copy of its own).
    func write(level: Logger.Level, _ append: (inout [UInt8]) -> Void) {
        let scheduleIdleFlush = state.withLock { state -> Bool in
            let now = Self.monotonicNanoseconds()
            if state.pending.isEmpty { state.batchStarted = now }
            append(&state.pending)
            guard let batchingDelay, level < .notice, state.pending.count < Self.maximumPendingBytes,
                now &- state.batchStarted < batchingDelay
            else {
                // Under the lock, so that lines from different threads keep their order.
                writeAll(state.pending)
                state.pending.removeAll(keepingCapacity: true)
                return false
            }
            guard !state.idleFlushScheduled else { return false }
            state.idleFlushScheduled = true
            return true
        }
        if scheduleIdleFlush {
            DispatchQueue.global().asyncAfter(deadline: .now() + idleFlushDelay) { self.flush() }
        }
    }

    /// Writes the lines waiting for their batch.
    func flush() {
        state.withLock { state in
            state.idleFlushScheduled = false
            guard !state.pending.isEmpty else { return }
            writeAll(state.pending)
            state.pending.removeAll(keepingCapacity: true)
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1_000_000_000 + Int(duration.components.attoseconds / 1_000_000_000)
    }

    /// A coarse monotonic clock (the kernel's last tick; no system call): precise enough for a batch's age.
    private static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    private func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(fileDescriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // nowhere to log that logging failed
                }
            }
        }
    }
}

/// `StreamLogHandler`'s timestamp (`%Y-%m-%dT%H:%M:%S%z`, local time), formatted once per second.
final class LogTimestampClock: Sendable {
    private let cache = Locked<(second: Int, text: String)>((-1, ""))

    func timestamp() -> String {
        let now = time(nil)
        if let cached = cache.withLock({ $0.second == now ? $0.text : nil }) { return cached }
        let text = Self.format(now)
        cache.withLock { $0 = (now, text) }
        return text
    }

    static func format(_ seconds: Int) -> String {
        var seconds = seconds
        var local = tm()
        guard localtime_r(&seconds, &local) != nil else { return "<unknown>" }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            let count = strftime(buffer.baseAddress!, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: count), as: UTF8.self)
        }
    }
}
