public import Foundation
internal import HabitFlowLocking

/// A record of every call a run made, one tab-separated line each, for checking afterwards what the server was told
/// and what it acknowledged (`habitflow-load run --ledger FILE`; `scripts/faults` reads it).
///
/// A line is `UNIX_MS  OPERATION  STATUS  USER_ID  CLIENT_ID  DETAIL`: the time the call ended in milliseconds since
/// 1970, the operation, `OK` or the status code name it failed with (as the report counts it), the user it acted for
/// (`-` when none yet), the id the client chose for what it wrote (`-` for reads) and a free-form detail (`-` when
/// none). A write that failed is recorded too, so a checker can tell "not acknowledged" from "lost".
///
/// Lines are buffered and written every ``flushThreshold`` bytes and at ``close()``; a run killed before it ends
/// loses at most the buffer.
public final class LoadLedger: Sendable {
    /// One call.
    public struct Line: Sendable, Hashable {
        public var time: Date
        public var operation: String
        public var status: String
        public var userID: String?
        public var clientID: String?
        public var detail: String?

        public init(
            time: Date = Date(), operation: String, status: String, userID: String? = nil, clientID: String? = nil,
            detail: String? = nil
        ) {
            self.time = time
            self.operation = operation
            self.status = status
            self.userID = userID
            self.clientID = clientID
            self.detail = detail
        }

        /// The line as written, with its newline. Tabs and newlines inside a field become spaces.
        public var text: String {
            let milliseconds = Int64((time.timeIntervalSince1970 * 1000).rounded())
            let fields = [operation, status, userID ?? "-", clientID ?? "-", detail ?? "-"].map(Self.field)
            return "\(milliseconds)\t" + fields.joined(separator: "\t") + "\n"
        }

        private static func field(_ value: String) -> String {
            guard !value.isEmpty else { return "-" }
            return String(value.map { $0 == "\t" || $0 == "\n" || $0 == "\r" ? " " : $0 })
        }
    }

    /// Bytes buffered before they are written.
    static let flushThreshold = 64 * 1024

    private struct State {
        var handle: FileHandle?
        var buffer: [UInt8] = []
    }

    private let state: Locked<State>
    public let path: String

    /// Creates (or truncates) the file at `path`.
    public init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw OptionError("cannot create the ledger file \(path)")
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        self.path = path
        self.state = Locked(State(handle: handle))
    }

    public func record(_ line: Line) {
        let bytes = Array(line.text.utf8)
        state.withLock { state in
            state.buffer.append(contentsOf: bytes)
            if state.buffer.count >= Self.flushThreshold { Self.write(&state) }
        }
    }

    /// Writes what is buffered.
    public func flush() {
        state.withLock { Self.write(&$0) }
    }

    /// Writes what is buffered and closes the file; later records are dropped.
    public func close() {
        state.withLock { state in
            Self.write(&state)
            try? state.handle?.close()
            state.handle = nil
        }
    }

    private static func write(_ state: inout State) {
        guard !state.buffer.isEmpty else { return }
        // A failed write (disk full) drops the lines rather than the run; the checker then sees calls missing.
        try? state.handle?.write(contentsOf: Data(state.buffer))
        state.buffer.removeAll(keepingCapacity: true)
    }
}
