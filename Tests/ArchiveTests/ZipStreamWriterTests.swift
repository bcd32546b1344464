import Foundation
import HabitFlowCalendar
import HabitFlowCompression
import HabitFlowCrypto
import HabitFlowTestSupport
import NIOCore
import Testing

@testable import HabitFlowArchive

/// One file of a test archive.
private struct TestFile {
    var name: String
    var modified: Date
    /// The DOS date and time Python's zipfile must report: `(year, month, day, hour, minute, second)`.
    var dateTime: [Int]
    var contents: [UInt8]
}

/// Python's view of an archive: `zipfile -t`, then per member its name, date, sizes, attributes and SHA-256, and a
/// check of the raw local header and data descriptor.
private let describeArchive = """
    import hashlib, json, struct, subprocess, sys, zipfile
    path = sys.argv[1]
    tested = subprocess.run([sys.executable, "-m", "zipfile", "-t", path], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    raw = open(path, "rb").read()
    members = []
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        for info in archive.infolist():
            data = archive.read(info)
            (signature, version, flags, method, _, _, crc, csize, usize, name_length, extra_length) = struct.unpack(
                "<IHHHHHIIIHH", raw[info.header_offset:info.header_offset + 30])
            assert signature == 0x04034B50 and (crc, csize, usize) == (0, 0, 0)
            end = info.header_offset + 30 + name_length + extra_length + info.compress_size
            descriptor = struct.unpack("<IIII", raw[end:end + 16])
            assert descriptor == (0x08074B50, info.CRC, info.compress_size, info.file_size), descriptor
            members.append({
                "name": info.filename, "date_time": list(info.date_time), "size": info.file_size,
                "method": info.compress_type, "flags": info.flag_bits, "local_flags": flags, "local_method": method,
                "version": version, "system": info.create_system, "mode": info.external_attr >> 16,
                "sha256": hashlib.sha256(data).hexdigest(),
            })
    print(json.dumps(members))
    """

private struct Member: Decodable, Equatable {
    var name: String
    var dateTime: [Int]
    var size: Int
    var method: Int
    var flags: Int
    var localFlags: Int
    var localMethod: Int
    var version: Int
    var system: Int
    var mode: Int
    var sha256: String
}

@Suite("ZIP, written as a stream")
struct ZipStreamWriterTests {
    private static let quarterPastEight = Date(timeIntervalSince1970: 1_795_767_337)  // 2026-11-27T08:15:37Z

    private static func exportFiles() -> [TestFile] {
        let entries = CSVWriter(columns: ["habit_id", "day", "done", "note", "recorded_at"])
        var big = entries.header
        var random = TestRandom(seed: 2026)
        var row = 0
        while big.utf8.count < 6_000_000 {
            let note = random.below(4) == 0 ? "felt \"great\", slept \(random.below(10)) h\nmore" : ""
            big += try! entries.row([
                .text("habit-\(random.below(40))"), .date(LocalDate(daysSinceEpoch: 19_000 + row / 40)),
                .bool(random.below(3) != 0), .text(note),
                .timestamp(Date(timeIntervalSince1970: 1_640_995_200 + Double(row) * 977.25)),
            ])
            row += 1
        }
        let readme = "Ihre Daten – your HabitFlow export 😀\r\nEntries: entries.csv (UTC times)\r\n"
        return [
            TestFile(name: "empty.csv", modified: quarterPastEight, dateTime: [2026, 11, 27, 8, 15, 36], contents: []),
            TestFile(
                name: "profile.csv", modified: Date(timeIntervalSince1970: 951_868_799),
                dateTime: [2000, 2, 29, 23, 59, 58], contents: Array("id,name\r\n1,\"Ada, L.\"\r\n".utf8)),
            TestFile(
                name: "LIESMICH – Übersicht 😀.txt", modified: quarterPastEight,
                dateTime: [2026, 11, 27, 8, 15, 36], contents: Array(readme.utf8)),
            TestFile(
                name: "data/entries.csv", modified: quarterPastEight + 1, dateTime: [2026, 11, 27, 8, 15, 38],
                contents: Array(big.utf8)),
            TestFile(
                name: "old.txt", modified: Date(timeIntervalSince1970: 315_532_799), dateTime: [1980, 1, 1, 0, 0, 0],
                contents: Array("before DOS time began".utf8)),
            TestFile(
                name: "future.txt", modified: .distantFuture, dateTime: [2107, 12, 31, 23, 59, 58],
                contents: Array("after DOS time ends".utf8)),
        ]
    }

    /// Writes `files` in pieces of up to `piece` bytes, taking the chunks after every call.
    private static func archive(_ files: [TestFile], chunkSize: Int, piece: Int) throws -> [ByteBuffer] {
        var zip = ZipStreamWriter(chunkSize: chunkSize)
        var chunks: [ByteBuffer] = []
        for file in files {
            try zip.startFile(named: file.name, modified: file.modified)
            var offset = 0
            while offset < file.contents.count {
                let end = min(file.contents.count, offset + piece)
                try zip.write(file.contents[offset..<end])
                chunks += zip.takeChunks()
                offset = end
            }
            try zip.finishFile()
            chunks += zip.takeChunks()
        }
        let entryCount = zip.entryCount  // #expect cannot look into a noncopyable value itself
        #expect(entryCount == files.count)
        try zip.finish()
        let (finished, byteCount) = (zip.isFinished, zip.byteCount)
        #expect(finished)
        chunks += zip.takeChunks()
        let pending = zip.pendingByteCount
        #expect(pending == 0)
        #expect(UInt64(chunks.reduce(0) { $0 + $1.readableBytes }) == byteCount)
        return chunks
    }

    private static func save(_ chunks: [ByteBuffer], to path: String) throws {
        var whole = ByteBuffer()
        for var chunk in chunks { whole.writeBuffer(&chunk) }
        try Data(whole.readableBytesView).write(to: URL(fileURLWithPath: path))
    }

    private static func members(of path: String) async throws -> [Member] {
        let output = try await python(describeArchive, [path])
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode([Member].self, from: Data(output.utf8))
    }

    @Test("an export of several files passes zipfile -t and reads back with its names, dates and bytes")
    func pythonReadsArchive() async throws {
        let folder = try ScratchFolder("zip")
        defer { folder.remove() }
        let files = Self.exportFiles()
        let chunkSize = 10_000
        let chunks = try Self.archive(files, chunkSize: chunkSize, piece: 3000)
        #expect(chunks.dropLast().allSatisfy { $0.readableBytes == chunkSize })
        #expect((1...chunkSize).contains(chunks.last?.readableBytes ?? 0))
        let path = folder.path("export.zip")
        try Self.save(chunks, to: path)

        let members = try await Self.members(of: path)
        #expect(members.map(\.name) == files.map(\.name))
        for (member, file) in zip(members, files) {
            #expect(member.dateTime == file.dateTime, "\(file.name)")
            #expect(member.size == file.contents.count, "\(file.name)")
            #expect(member.sha256 == Hex.encode(SHA256.hash(file.contents)), "\(file.name)")
            #expect(member.method == 8 && member.localMethod == 8)
            #expect(member.flags == 0x0808 && member.localFlags == 0x0808)
            #expect(member.version == 20 && member.system == 3 && member.mode == 0o100644)
        }
        let big = try #require(files.first { $0.name == "data/entries.csv" })
        #expect(chunks.reduce(0) { $0 + $1.readableBytes } < big.contents.count / 3, "CSV rows compress")
    }

    @Test("unzip -t finds no errors", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/unzip")))
    func unzipTests() async throws {
        let folder = try ScratchFolder("unzip")
        defer { folder.remove() }
        let path = folder.path("export.zip")
        try Self.save(try Self.archive(Self.exportFiles(), chunkSize: 64 * 1024, piece: 8192), to: path)
        let result = try await run("/usr/bin/unzip", ["-t", path])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("No errors detected"), "\(result.output)")
        let listing = try await run("/usr/bin/unzip", ["-Z", "-l", path])
        #expect(listing.output.contains("-rw-r--r--"), "\(listing.output)")
    }

    @Test("an archive with no files is just the end record, and Python opens it")
    func emptyArchive() async throws {
        let folder = try ScratchFolder("zip-empty")
        defer { folder.remove() }
        var zip = ZipStreamWriter()
        try zip.finish()
        let chunks = zip.takeChunks()
        #expect(chunks.map(\.readableBytes) == [22])
        try Self.save(chunks, to: folder.path("empty.zip"))
        #expect(try await Self.members(of: folder.path("empty.zip")) == [])
    }

    @Test("50 MB written in small pieces: the writer never holds more than a chunk plus one deflate block")
    func boundedMemory() async throws {
        let folder = try ScratchFolder("zip-stream")
        defer { folder.remove() }
        let chunkSize = 64 * 1024
        let maximumPiece = 8 * 1024
        // The documented bound: a chunk being filled plus one call's output (one deflate block of at most 64 KiB,
        // or a data descriptor, or a local header).
        let bound = chunkSize + 64 * 1024 + 16
        let total = 50 * 1024 * 1024

        // A 1 MiB pool of half CSV text, half noise, sliced at random: some blocks compress, some are stored.
        var random = TestRandom(seed: 50)
        let rows = (0..<14_000).map { "\($0),habit-\($0 % 23),2026-11-\($0 % 28 + 1),true,\($0 * 31)\r\n" }
        let pool = Array(rows.joined().utf8.prefix(512 * 1024)) + random.bytes(512 * 1024)

        let output = FileManager.default.createFile(atPath: folder.path("big.zip"), contents: nil)
        #expect(output)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: folder.path("big.zip")))
        var zip = ZipStreamWriter(chunkSize: chunkSize)
        var maximumPending = 0
        var chunkCount = 0
        func send(_ zip: inout ZipStreamWriter) throws {
            let (pending, finished) = (zip.pendingByteCount, zip.isFinished)
            maximumPending = max(maximumPending, pending)
            #expect(pending <= bound)
            for chunk in zip.takeChunks() {
                #expect(chunk.readableBytes == chunkSize || finished)
                try file.write(contentsOf: Data(chunk.readableBytesView))
                chunkCount += 1
            }
            let left = zip.pendingByteCount
            #expect(left < chunkSize || finished)
        }

        try zip.startFile(named: "entries.csv", modified: Self.quarterPastEight)
        try send(&zip)
        var crc = CRC32()
        var written = 0
        while written < total {
            let count = min(1 + random.below(maximumPiece), total - written)
            let start = random.below(pool.count - count)
            let piece = pool[start..<(start + count)]
            crc.update(piece)
            try zip.write(piece)
            try send(&zip)
            written += count
        }
        try zip.finishFile()
        try send(&zip)
        try zip.addFile(named: "README.txt", modified: Self.quarterPastEight, contents: "50 MB of rows\r\n")
        try send(&zip)
        try zip.finish()
        try send(&zip)
        try file.close()
        #expect(chunkCount > 100)
        #expect(maximumPending <= bound)

        let script = """
            import json, sys, zipfile, zlib
            with zipfile.ZipFile(sys.argv[1]) as archive:
                assert archive.testzip() is None
                result = {}
                for info in archive.infolist():
                    crc, size = 0, 0
                    with archive.open(info) as member:
                        while block := member.read(1 << 20):
                            crc, size = zlib.crc32(block, crc), size + len(block)
                    result[info.filename] = [size, crc]
            print(json.dumps(result))
            """
        let result = try JSONDecoder().decode(
            [String: [UInt64]].self, from: Data(try await python(script, [folder.path("big.zip")]).utf8))
        #expect(result["entries.csv"] == [UInt64(total), UInt64(crc.value)])
        #expect(result["README.txt"] == [15, UInt64(CRC32.checksum(Array("50 MB of rows\r\n".utf8)))])
    }

    @Test("calls out of order throw and change nothing: the archive still comes out whole")
    func misuse() async throws {
        var zip = ZipStreamWriter()
        expect(.noOpenFile) { try zip.write("before any file") }
        expect(.noOpenFile) { try zip.finishFile() }
        try zip.startFile(named: "a.csv", modified: Self.quarterPastEight)
        expect(.fileStillOpen) { try zip.startFile(named: "b.csv", modified: .now) }
        expect(.fileStillOpen) { try zip.finish() }
        try zip.write("x,y\r\n")
        try zip.finishFile()
        expect(.noOpenFile) { try zip.write([1, 2, 3]) }
        expect(.noOpenFile) { try zip.finishFile() }

        let longName = String(repeating: "n", count: 65_536)
        let invalidNames = [
            "", "/etc/passwd", "../up.txt", "a/../../b", "./a", "a/./b", "a//b", "folder/", "a\\b", "nul\u{0}.txt",
            longName,
            // Each a `Character` that is neither `\` nor `/`, whose bytes still are: the first is the csv fuzz target's
            // reproducer (a backslash and a variation selector).
            "eric\\\u{FE0F}", "a\\\u{301}b", "/\u{301}etc/passwd", "a//\u{301}b", "./\u{301}x",
        ]
        for name in invalidNames {
            expect(.invalidName, "\(name.prefix(20).debugDescription)") {
                try zip.startFile(named: name, modified: .now)
            }
        }
        expect(.duplicateName) { try zip.startFile(named: "a.csv", modified: .now) }
        try zip.addFile(named: "caf\u{E9}.txt", modified: Self.quarterPastEight, contents: "precomposed")
        expect(.duplicateName) { try zip.startFile(named: "cafe\u{301}.txt", modified: .now) }
        try zip.addFile(named: "folder/a.csv", modified: Self.quarterPastEight, contents: "same name, other folder")
        let entryCount = zip.entryCount
        #expect(entryCount == 3)

        try zip.finish()
        let chunks = zip.takeChunks()
        expect(.finished) { try zip.finish() }
        expect(.finished) { try zip.startFile(named: "late.txt", modified: .now) }
        expect(.finished) { try zip.write("late") }
        expect(.finished) { try zip.finishFile() }
        let more = zip.takeChunks()
        #expect(more.isEmpty)

        let folder = try ScratchFolder("zip-misuse")
        defer { folder.remove() }
        try Self.save(chunks, to: folder.path("misuse.zip"))
        let names = try await Self.members(of: folder.path("misuse.zip")).map(\.name)
        #expect(names == ["a.csv", "café.txt", "folder/a.csv"])
    }

    @Test("a file modified at a far-off or non-finite time is dated at the end or the start of DOS time (fuzz: csv)")
    func farOffModificationTimes() throws {
        let end = DOSDateTime(.distantFuture)
        let start = DOSDateTime(.distantPast)
        // The fuzz target's reproducer: 1.2e225 s after 1970, whose microseconds overflowed an Int64.
        let reproducer = Date(timeIntervalSince1970: Double(bitPattern: 0x6EDA_BF61_0000_0000))
        let cases = [
            (reproducer, end), (Date(timeIntervalSince1970: .infinity), end), (Date(timeIntervalSince1970: 1e13), end),
            (Date(timeIntervalSince1970: -1e300), start), (Date(timeIntervalSince1970: -.infinity), start),
            (Date(timeIntervalSince1970: .nan), start),
        ]
        for (time, expected) in cases {
            #expect(DOSDateTime(time) == expected, "\(time.timeIntervalSince1970)")
        }

        var zip = ZipStreamWriter()
        try zip.startFile(named: "entritraili", modified: reproducer)
        try zip.finishFile()
        try zip.finish()
        let archive = zip.takeChunks().flatMap { Array($0.readableBytesView) }
        // The local header's time and date (offsets 10 and 12, little-endian).
        #expect(UInt16(archive[10]) | UInt16(archive[11]) << 8 == end.time)
        #expect(UInt16(archive[12]) | UInt16(archive[13]) << 8 == end.date)
    }

    @Test("the 65,536th file is refused, and the archive of 65,535 finishes and opens")
    func tooManyEntries() async throws {
        var zip = ZipStreamWriter()
        var chunks: [ByteBuffer] = []
        for index in 0..<ZipStreamWriter.maximumEntryCount {
            try zip.startFile(named: "\(index)", modified: Self.quarterPastEight)
            try zip.finishFile()
            chunks += zip.takeChunks()
        }
        expect(.tooManyEntries) { try zip.startFile(named: "one too many", modified: .now) }
        try zip.finish()
        chunks += zip.takeChunks()

        let folder = try ScratchFolder("zip-many")
        defer { folder.remove() }
        try Self.save(chunks, to: folder.path("many.zip"))
        let script = """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1]) as archive:
                names = archive.namelist()
                assert names == [str(index) for index in range(65535)], names[-3:]
                assert archive.read("65534") == b""
            print(len(names))
            """
        #expect(try await python(script, [folder.path("many.zip")]) == "65535\n")
    }

    @Test("a file or an archive past the size limit throws, and the writer then refuses everything")
    func sizeLimits() throws {
        // Uncompressed size.
        var zip = ZipStreamWriter(chunkSize: 1024, compressionLevel: 6, limits: .init(maximumEntrySize: 1000))
        try zip.startFile(named: "big.csv", modified: Self.quarterPastEight)
        try zip.write([UInt8](repeating: 65, count: 1000))
        expect(.entryTooLarge) { try zip.write([66]) }
        let error = #expect(throws: ZipError.self) { try zip.write([66]) }
        #expect(error?.code == .failed)
        #expect((error?.cause as? ZipError)?.code == .entryTooLarge)
        expect(.failed) { try zip.finishFile() }
        expect(.failed) { try zip.finish() }

        // Compressed size: incompressible data grows by deflate's few bytes of framing.
        var random = TestRandom(seed: 1)
        var noise = ZipStreamWriter(chunkSize: 1024, compressionLevel: 6, limits: .init(maximumEntrySize: 1000))
        try noise.startFile(named: "noise.bin", modified: Self.quarterPastEight)
        try noise.write(random.bytes(1000))
        expect(.entryTooLarge) { try noise.finishFile() }
        expect(.failed) { try noise.startFile(named: "next", modified: .now) }

        // The whole archive.
        var archive = ZipStreamWriter(chunkSize: 1024, compressionLevel: 6, limits: .init(maximumArchiveSize: 2000))
        let refused = #expect(throws: ZipError.self) {
            for index in 0..<100 {
                try archive.addFile(
                    named: "file \(index).txt", modified: Self.quarterPastEight, contents: "a few bytes")
            }
        }
        #expect(refused?.code == .archiveTooLarge)
        let byteCount = archive.byteCount
        #expect(byteCount > 2000 && byteCount < 2200)
        expect(.failed) { try archive.finish() }
    }

    @Test("modification times are UTC, rounded down to even seconds, and clamped to DOS's 1980...2107")
    func dosTimes() {
        let time = DOSDateTime(Self.quarterPastEight)
        #expect(time.time == 8 << 11 | 15 << 5 | 18)
        #expect(time.date == 46 << 9 | 11 << 5 | 27)
        #expect(DOSDateTime(Self.quarterPastEight + 0.999) == time)
        #expect(DOSDateTime(Date(timeIntervalSince1970: 0)) == DOSDateTime(Date(timeIntervalSince1970: 315_532_800)))
        let last = DOSDateTime(.distantFuture)
        #expect(last.date == 127 << 9 | 12 << 5 | 31 && last.time == 23 << 11 | 59 << 5 | 29)
    }
}

/// Expects `body` to throw a ``ZipError`` with `code`.
private func expect(
    _ code: ZipError.Code, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = #expect(throws: ZipError.self, comment, sourceLocation: sourceLocation) { try body() }
    #expect(error?.code == code, comment, sourceLocation: sourceLocation)
}
