internal import Foundation
internal import HabitFlowArchive
internal import HabitFlowFuzzSupport
internal import NIOCore

// The data export's writers, with names and values users chose, in two modes picked by the first byte:
//
// 0. CSV: one record of 1-8 text fields (chunks, after a count byte), then a number, a timestamp and a date (8
//    bytes each). A reference RFC 4180 reader must get every text field back byte for byte, and the numbers and
//    times must read back as what they were made from.
// 1. ZIP: up to 8 files, each a name (chunk), a modification time (8 bytes), contents (chunk) and 1 byte of flags
//    (bit 0: leave the file open, so the next call must be refused). The finished archive's directory must list
//    exactly the files that were accepted, and no accepted name may be unsafe to extract: absolute, with a
//    backslash, NUL, or an empty, `.` or `..` component, judged on its bytes as an unzip tool sees them.

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.writeSeedsIfAsked(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    if input.byte() % 2 == 0 {
        checkCSV(&input)
    } else {
        checkZip(&input)
    }
    return 0
}

// MARK: - CSV

private func checkCSV(_ input: inout FuzzInput) {
    let fields = (0...(input.byte() % 8)).map { _ in input.string() }
    let record = CSVWriter.record(fields)
    let parsed = RFC4180.parseRecord(Array(record.utf8))
    expect(parsed == fields.map { Array($0.utf8) }, "CSV record \(record.debugDescription) reads back differently")
    let writer = CSVWriter(columns: fields)
    expect(writer.header == record, "the header is not the record of the column names")
    expect((try? writer.row(fields.map { CSVField($0) })) == record, "a row is not the record of its fields")

    let number = Double(bitPattern: input.uint64())
    let numberText = CSVField.double(number).text
    if number.isNaN {
        expect(numberText == "nan", "NaN is written \(numberText)")
    } else {
        expect(Double(numberText) == number, "\(number) is written \(numberText)")
    }
    let integer = Int64(bitPattern: input.uint64())
    expect(Int64(CSVField.integer(integer).text) == integer, "\(integer) does not read back")

    // About the range of Postgres timestamps (4713 BC to 294276 AD), to the microsecond.
    let micros = Int64(bitPattern: input.uint64()) % 9_000_000_000_000_000_000
    let instant = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
    let timestamp = CSVField.timestamp(instant).text
    expect(RFC4180.isTimestamp(timestamp), "timestamp \(timestamp) is not RFC 3339")
}

/// The reading side of RFC 4180, as strict as the RFC: a reference the writer's output must satisfy.
private enum RFC4180 {
    /// The fields of one record ended by CRLF; `nil` when `bytes` is not exactly one well-formed record.
    static func parseRecord(_ bytes: [UInt8]) -> [[UInt8]]? {
        var fields: [[UInt8]] = []
        var index = 0
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n")
        while true {
            var field: [UInt8] = []
            if index < bytes.count, bytes[index] == quote {
                index += 1
                while true {
                    guard index < bytes.count else { return nil }
                    if bytes[index] == quote {
                        if index + 1 < bytes.count, bytes[index + 1] == quote {
                            field.append(quote)
                            index += 2
                        } else {
                            index += 1
                            break
                        }
                    } else {
                        field.append(bytes[index])
                        index += 1
                    }
                }
            } else {
                while index < bytes.count, bytes[index] != comma, bytes[index] != cr {
                    guard bytes[index] != quote, bytes[index] != lf else { return nil }
                    field.append(bytes[index])
                    index += 1
                }
                // Unquoted fields keep no leading or trailing blanks, which some readers trim.
                for blank in [UInt8(ascii: " "), UInt8(ascii: "\t")] where field.first == blank || field.last == blank {
                    return nil
                }
            }
            fields.append(field)
            guard index < bytes.count else { return nil }
            if bytes[index] == comma {
                index += 1
                continue
            }
            guard bytes[index] == cr, index + 2 == bytes.count, bytes[index + 1] == lf else { return nil }
            return fields
        }
    }

    /// `[-]YYYY[Y...]-MM-DDTHH:MM:SS[.ffffff]Z`, fields in range.
    static func isTimestamp(_ text: String) -> Bool {
        var rest = Substring(text)
        if rest.first == "-" { rest = rest.dropFirst() }
        let parts = rest.split(separator: "T", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].last == "Z" else { return false }
        let date = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard date.count == 3, date[0].count >= 4, date[1].count == 2, date[2].count == 2,
            date.allSatisfy({ $0.allSatisfy(\.isASCII) && Int($0) != nil }),
            (1...12).contains(Int(date[1])!), (1...31).contains(Int(date[2])!)
        else { return false }
        let time = parts[1].dropLast().split(separator: ".", omittingEmptySubsequences: false)
        guard time.count == 1 || (time.count == 2 && time[1].count == 6 && Int(time[1]) != nil) else { return false }
        let clock = time[0].split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard clock.count == 3, let hour = clock[0], let minute = clock[1], let second = clock[2] else { return false }
        return (0..<24).contains(hour) && (0..<60).contains(minute) && (0..<60).contains(second)
    }
}

// MARK: - ZIP

private func checkZip(_ input: inout FuzzInput) {
    var writer = ZipStreamWriter(chunkSize: 512)
    var archive: [UInt8] = []
    var accepted: [(name: String, size: Int)] = []
    var open = false
    for _ in 0..<8 where !input.isEmpty {
        let name = input.string()
        let modified = Date(timeIntervalSince1970: Double(bitPattern: input.uint64()))
        let contents = input.chunk()
        let leaveOpen = input.bool()
        do throws(ZipError) {
            try writer.startFile(named: name, modified: modified)
            expect(!open, "a file started while another was open")
            expect(isSafe(name), "accepted the unsafe name \(name.debugDescription)")
            expect(!accepted.contains { $0.name == name }, "accepted the name \(name.debugDescription) twice")
            try writer.write(contents)
            if !leaveOpen { try writer.finishFile() }
            accepted.append((name, contents.count))
            open = leaveOpen
        } catch {
            expect(error.code != .failed && error.code != .finished, "unexpected \(error)")
        }
        for chunk in writer.takeChunks() { archive += chunk.readableBytesView }
    }
    if open {
        do throws(ZipError) {
            try writer.finish()
            fatalError("finished with a file open")
        } catch {
            expect(error.code == .fileStillOpen, "unexpected \(error)")
        }
        do { try writer.finishFile() } catch { fatalError("could not finish the open file: \(error)") }
    }
    do { try writer.finish() } catch { fatalError("could not finish the archive: \(error)") }
    for chunk in writer.takeChunks() { archive += chunk.readableBytesView }

    guard let entries = try? ZipDirectory.entries(of: Data(archive)) else {
        fatalError("the archive's directory does not read")
    }
    expect(entries.map(\.name) == accepted.map(\.name), "the directory lists other names")
    expect(entries.map(\.uncompressedSize) == accepted.map(\.size), "the directory lists other sizes")
    _ = try? ZipDirectory.entries(of: Data(archive.dropLast(1)))
}

/// What unzip tools on any system extract where it was meant to go, judged on the name's UTF-8 bytes.
private func isSafe(_ name: String) -> Bool {
    let bytes = Array(name.utf8)
    guard !bytes.isEmpty, bytes.count <= 65_535, !bytes.contains(0), !bytes.contains(UInt8(ascii: "\\")) else {
        return false
    }
    return bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).allSatisfy { component in
        !component.isEmpty && !component.elementsEqual([UInt8(ascii: ".")])
            && !component.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")])
    }
}

// MARK: - Seeds

private func seeds() -> [String: [UInt8]] {
    func csv(_ fields: [String], number: Double = 2.5, integer: Int64 = -42, micros: Int64 = 1_795_000_000_250_000)
        -> [UInt8]
    {
        var builder = FuzzInputBuilder()
        builder.byte(0)
        builder.byte(UInt8(fields.count - 1))
        for field in fields { builder.string(field) }
        builder.uint64(number.bitPattern)
        builder.uint64(UInt64(bitPattern: integer))
        builder.uint64(UInt64(bitPattern: micros))
        return builder.bytes
    }
    func zip(_ files: [(name: String, contents: String, leaveOpen: Bool)]) -> [UInt8] {
        var builder = FuzzInputBuilder()
        builder.byte(1)
        for file in files {
            builder.string(file.name)
            builder.uint64(Double(1_795_000_000).bitPattern)
            builder.string(file.contents)
            builder.bool(file.leaveOpen)
        }
        return builder.bytes
    }
    return [
        "csv-plain": csv(["id", "name", "created_at"]),
        "csv-quotes-commas": csv(["Read \"War and Peace\", slowly", "a,b", "\"\""]),
        "csv-newlines": csv(["line one\nline two", "cr\ronly", "crlf\r\nend"]),
        "csv-blanks": csv([" leading", "trailing\t", " ", ""]),
        "csv-one-empty": csv([""]),
        "csv-emoji": csv(["🏃‍♀️ Run 5 km", "日本語", "e\u{301}", "=1+2", "-3"]),
        "csv-numbers": csv(["x"], number: 1e-7, integer: .min, micros: -210_866_803_200_000_000),
        "zip-export": zip([
            ("habits.csv", "id,name\r\n1,Run\r\n", false), ("entries.csv", "", false), ("README.txt", "hello", false),
        ]),
        "zip-folders": zip([("export/habits.csv", "a", false), ("export/notes/ü.txt", "b", false)]),
        "zip-bad-names": zip([
            ("../escape", "x", false), ("/abs", "x", false), ("a\\b", "x", false), ("a//b", "x", false),
            ("ok.txt", "x", false), ("ok.txt", "again", false),
        ]),
        "zip-open-file": zip([("open.csv", "never finished", true), ("next.csv", "refused", false)]),
    ]
}
