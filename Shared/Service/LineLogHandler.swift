internal import Dispatch
public import Logging
internal import Synchronization

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The log handler of every HabitFlow process: swift-log's `StreamLogHandler` line format, unchanged
/// (`<time> <level> <label>: <key>=<value> … [<source>] <message>`, keys sorted), written to standard error.
///
/// Cheaper per line than `StreamLogHandler`, which mattered for the gateway's access log (one line per call, 9% of
/// the gateway's CPU time): the line is assembled in one string, the timestamp is formatted once per second rather
/// than per line, and lines go out in batches (see ``LineOutput``).
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    public var metadata: Logger.Metadata = [:]

    private let label: String
    private let output: LineOutput

    /// Lines to standard error (what ``ServiceMain`` bootstraps); info and debug lines are batched for up to 10 ms.
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
        var line = ""
        line.reserveCapacity(128 + metadata.count * 48)
        line += timestamp
        line += " "
        line += level.rawValue
        if !label.isEmpty {
            line += " "
            line += label
        }
        line += ":"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += " "
            line += key
            line += "="
            if case .string(let text) = value { line += text } else { line += value.description }
        }
        line += " ["
        line += source
        line += "] "
        line += message.description
        line += "\n"
        return line
    }
}

/// Where a ``LineLogHandler`` writes: a file descriptor, with `write(2)` (retried until everything is out).
///
/// Lines below `notice` may wait up to `batchingDelay` to go out together with the lines logged meanwhile: the
/// gateway's access log is a line per call, and a `write` per line was a sizeable share of its CPU time per call.
/// A `notice` or more severe line goes out at once, with every line before it, and so does a batch grown past 64 KiB;
/// ``flush()`` (``ServiceMain`` calls it before the process exits) writes what is waiting. Lines keep their order.
final class LineOutput: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var flushScheduled = false
    }

    private let fileDescriptor: Int32
    private let batchingDelay: Duration?
    private let state = Mutex(State())
    private static let maximumPendingBytes = 64 * 1024
    let clock = LogTimestampClock()

    /// - Parameter batchingDelay: `nil` writes every line at once.
    init(fileDescriptor: Int32, batchingDelay: Duration?) {
        self.fileDescriptor = fileDescriptor
        self.batchingDelay = batchingDelay
    }

    func write(_ line: String, level: Logger.Level) {
        let scheduleFlush = state.withLock { state -> Bool in
            state.pending.append(contentsOf: line.utf8)
            if batchingDelay == nil || level >= .notice || state.pending.count >= Self.maximumPendingBytes {
                // Under the lock, so that lines from different threads keep their order.
                writeAll(state.pending)
                state.pending.removeAll(keepingCapacity: true)
                return false
            }
            guard !state.flushScheduled else { return false }
            state.flushScheduled = true
            return true
        }
        if scheduleFlush, let batchingDelay {
            let nanoseconds = Int(batchingDelay.components.seconds) * 1_000_000_000
                + Int(batchingDelay.components.attoseconds / 1_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { self.flush() }
        }
    }

    /// Writes the lines waiting for their batch.
    func flush() {
        state.withLock { state in
            state.flushScheduled = false
            guard !state.pending.isEmpty else { return }
            writeAll(state.pending)
            state.pending.removeAll(keepingCapacity: true)
        }
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
    private let cache = Mutex<(second: Int, text: String)>((-1, ""))

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
