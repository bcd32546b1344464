import Foundation
import HabitFlowRPC
@testable import HabitFlowServiceKit
import Logging
import Testing

/// The log handler every process bootstraps.
@Suite struct LineLogHandlerTests {
    /// A file the handler writes to, read back whole.
    final class LogFile: Sendable {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("line-log-\(UUID().uuidString)").path
        let handle: FileHandle

        init() throws {
            FileManager.default.createFile(atPath: path, contents: nil)
            handle = try #require(FileHandle(forWritingAtPath: path))
        }

        var text: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

        deinit {
            try? handle.close()
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    @Test func linesKeepStreamLogHandlersFormat() {
        let line = LineLogHandler.line(
            timestamp: "2026-11-23T05:35:00+0000", level: .info, label: "habitflow-gateway",
            metadata: ["rpc": "/a.B/C", "client": .string("127.0.0.1"), "count": .stringConvertible(3), "list": ["x", "y"]],
            source: "HabitFlowGateway", message: "call")
        #expect(
            line
                == "2026-11-23T05:35:00+0000 info habitflow-gateway: client=127.0.0.1 count=3 list=[\"x\", \"y\"] rpc=/a.B/C [HabitFlowGateway] call\n"
        )
        let bare = LineLogHandler.line(
            timestamp: "T", level: .warning, label: "", metadata: [:], source: "Kit", message: "careful")
        #expect(bare == "T warning: [Kit] careful\n")
    }

    @Test func timestampsAreStreamLogHandlersAndCachedPerSecond() {
        let clock = LogTimestampClock()
        let text = clock.timestamp()
        #expect(text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{4}/) != nil)
        #expect(LogTimestampClock.format(0).wholeMatch(of: /19(69|70)-\d{2}-\d{2}T\d{2}:\d{2}:00[+-]\d{4}/) != nil)
        if TimeZone.current.secondsFromGMT(for: Date(timeIntervalSince1970: 0)) == 0 {
            #expect(LogTimestampClock.format(0) == "1970-01-01T00:00:00+0000")
        }
    }

    @Test func infoLinesWaitForTheirBatchNoticesAndFlushWriteEverythingInOrder() throws {
        let file = try LogFile()
        let output = LineOutput(fileDescriptor: file.handle.fileDescriptor, batchingDelay: .seconds(60))
        var logger = Logger(label: "batch") { LineLogHandler(label: $0, output: output) }
        logger.logLevel = .debug
        logger[metadataKey: "service"] = "test"
        logger.info("first", metadata: ["n": "1"])
        logger.debug("second")
        #expect(file.text.isEmpty)
        logger.notice("third")
        let lines = file.text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines.map { $0.split(separator: " ").last } == ["first", "second", "third"])
        #expect(lines.first?.contains(" info batch: n=1 service=test [") == true)

        logger.info("fourth", metadata: ["service": "overridden"])
        #expect(file.text.split(separator: "\n").count == 3)
        output.flush()
        let last = try #require(file.text.split(separator: "\n").last)
        #expect(last.hasSuffix("fourth"))
        #expect(last.contains("service=overridden"))
    }

    @Test func batchedLinesGoOutWithinTheDelayWithoutAFlush() async throws {
        let file = try LogFile()
        let output = LineOutput(fileDescriptor: file.handle.fileDescriptor, batchingDelay: .milliseconds(10))
        let logger = Logger(label: "batch") { LineLogHandler(label: $0, output: output) }
        for index in 0..<100 { logger.info("line \(index)") }
        for _ in 0..<200 where file.text.split(separator: "\n").count < 100 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let lines = file.text.split(separator: "\n")
        #expect(lines.count == 100)
        #expect(lines.map { $0.split(separator: " ").last.map(String.init) } == (0..<100).map { "\($0)" })
    }

    @Test func loggedErrorsNameTheirMessageAndType() throws {
        struct Broken: Error, CustomStringConvertible {
            var description: String { "it broke" }
        }
        let file = try LogFile()
        let output = LineOutput(fileDescriptor: file.handle.fileDescriptor, batchingDelay: nil)
        let handler = LineLogHandler(label: "errors", output: output)
        handler.log(
            event: LogEvent(
                level: .error, message: "failed", error: Broken(), metadata: nil, source: "Kit", file: #fileID,
                function: #function, line: #line))
        #expect(file.text.contains("error.message=it broke"))
        #expect(file.text.contains("error.type="))
    }
}
