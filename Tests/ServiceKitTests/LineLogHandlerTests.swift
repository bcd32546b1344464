import Foundation
import HabitFlowRPC
@testable import HabitFlowServiceKit
import HabitFlowTestSupport
import Logging
import Testing

/// The log handler every process bootstraps.
@Suite struct LineLogHandlerTests {
    /// A file the handler writes to, read back whole.
    final class LogFile: Sendable {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("line-log-\(UUID().uuidString)").path
        let handle: FileHandle

        init() throws {
            try #require(FileManager.default.createFile(atPath: path, contents: nil))
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

    @Test func aBatchGoesOutWithTheFirstLineAfterTheDelayWithoutWaitingForTheTimer() async throws {
        let file = try LogFile()
        let output = LineOutput(
            fileDescriptor: file.handle.fileDescriptor, batchingDelay: .milliseconds(200), idleFlushDelay: .seconds(60))
        let logger = Logger(label: "batch") { LineLogHandler(label: $0, output: output) }
        logger.info("first")
        logger.info("second")
        #expect(file.text.isEmpty)
        // The delay is long enough that the two lines above never straddle it, even on a busy machine; the coarse
        // clock advances by a scheduler tick (up to 4 ms), so 300 ms is past it whatever the tick.
        try await Task.sleep(for: .milliseconds(300))
        #expect(file.text.isEmpty)
        logger.info("third")
        #expect(file.text.split(separator: "\n").map { $0.split(separator: " ").last } == ["first", "second", "third"])
        logger.info("fourth")
        #expect(file.text.split(separator: "\n").count == 3)
        output.flush()
        #expect(file.text.split(separator: "\n").count == 4)
    }

    /// Fields in key order, as a per-call line gives them.
    struct CallFields: LogLineFields {
        var fields: [(String, String)]

        init(_ fields: [(String, String)]) { self.fields = fields }

        func forEachField(_ field: (_ key: String, _ value: String) -> Void) {
            for (key, value) in fields { field(key, value) }
        }
    }

    /// The file's lines without their timestamps (two lines may straddle a second).
    static func linesAfterTimestamps(_ file: LogFile) -> [Substring] {
        file.text.split(separator: "\n").map { $0.drop { $0 != " " } }
    }

    @Test(arguments: [
        [:],
        ["service": "gateway"],
        // Before, between and after the fields, a field's key (the field wins), and a value that is not a string.
        ["aaa": "first", "m": .stringConvertible(3), "rpc": "overridden", "zzz": ["x", "y"], "status": "handler's"],
    ] as [Logger.Metadata])
    func fieldLinesAreTheMetadataLinesByteForByte(handlerMetadata: Logger.Metadata) throws {
        let file = try LogFile()
        let output = LineOutput(fileDescriptor: file.handle.fileDescriptor, batchingDelay: nil)
        var logger = Logger(label: "habitflow-gateway") { LineLogHandler(label: $0, output: output) }
        for (key, value) in handlerMetadata { logger[metadataKey: key] = value }
        for fields in [
            CallFields([("client", "127.0.0.1"), ("rpc", "/a.B/C"), ("status", "OK"), ("user_id", "u-1")]),
            CallFields([("rpc", "/a.B/C")]),
            CallFields([("a", "é"), ("n", ""), ("zzzz", "last")]),
            CallFields([]),
        ] {
            logger.log(level: .info, "call", metadata: fields.metadata)
            logger.log(level: .info, "call", fields: fields)
            logger.log(level: .warning, "call", metadata: fields.metadata, source: "Elsewhere")
            logger.log(level: .warning, "call", fields: fields, source: "Elsewhere")
        }
        let lines = Self.linesAfterTimestamps(file)
        #expect(lines.count == 16)
        for pair in stride(from: 0, to: lines.count, by: 2) {
            #expect(lines[pair + 1] == lines[pair])
        }
        if handlerMetadata.count == 5 {
            #expect(
                lines.first
                    == " info habitflow-gateway: aaa=first client=127.0.0.1 m=3 rpc=/a.B/C status=OK user_id=u-1 zzz=[\"x\", \"y\"] [ServiceKitTests] call"
            )
        }
        #expect(lines[2].hasSuffix(" [Elsewhere] call"))
    }

    @Test func fieldLinesFollowTheLevelsBatchesAndMetadataProvider() throws {
        let file = try LogFile()
        let output = LineOutput(fileDescriptor: file.handle.fileDescriptor, batchingDelay: .seconds(60))
        var logger = Logger(label: "levels") {
            LineLogHandler(label: $0, output: output, metadataProvider: Logger.MetadataProvider { ["provided": "p"] })
        }
        logger.logLevel = .notice
        var evaluations = 0
        func countingFields() -> CallFields {
            evaluations += 1
            return CallFields([("n", "1")])
        }
        logger.log(level: .info, "filtered", fields: countingFields())
        #expect(evaluations == 0)
        #expect(file.text.isEmpty)

        logger.logLevel = .info
        logger.log(level: .info, "batched", fields: countingFields())
        #expect(file.text.isEmpty)
        logger.log(level: .notice, "at once", fields: countingFields())
        #expect(evaluations == 2)
        let lines = Self.linesAfterTimestamps(file)
        #expect(
            lines == [
                " info levels: n=1 provided=p [ServiceKitTests] batched",
                " notice levels: n=1 provided=p [ServiceKitTests] at once",
            ])
    }

    @Test func otherHandlersGetTheFieldsAsMetadata() {
        let records = LogCapture()
        var logger = Logger(label: "capture") { _ in records }
        logger[metadataKey: "service"] = "test"
        logger.log(level: .info, "call", fields: CallFields([("client", "::1"), ("status", "OK")]))
        #expect(records.entries.map(\.message) == ["call"])
        #expect(records.entries.first?.metadata == ["client": "::1", "service": "test", "status": "OK"])
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
