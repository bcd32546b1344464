import Foundation
import HabitFlowArchive
import HabitFlowCalendar
import HabitFlowCrypto
import Testing

@Suite("CSV (RFC 4180)")
struct CSVWriterTests {
    /// Values that need care, each with how it must appear in a record.
    static let tricky: [(value: String, encoded: String)] = [
        ("plain", "plain"),
        ("", ""),
        ("inner space", "inner space"),
        ("a,b", "\"a,b\""),
        ("say \"hi\"", "\"say \"\"hi\"\"\""),
        ("\"", "\"\"\"\""),
        ("line 1\nline 2", "\"line 1\nline 2\""),
        ("cr\ronly", "\"cr\ronly\""),
        ("crlf\r\n", "\"crlf\r\n\""),
        (" leading", "\" leading\""),
        ("trailing ", "\"trailing \""),
        ("\ttab", "\"\ttab\""),
        (" ", "\" \""),
        ("=1+1", "=1+1"),
        ("+33 1 23 45", "+33 1 23 45"),
        ("-5", "-5"),
        ("@SUM(A1:A2)", "@SUM(A1:A2)"),
        ("=HYPERLINK(\"http://x\",\"y\")", "\"=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""),
        ("Grüße, 世界 😀👍🏽", "\"Grüße, 世界 😀👍🏽\""),
        ("e\u{301}te\u{301} (combining)", "e\u{301}te\u{301} (combining)"),
        ("\u{1F469}\u{200D}\u{1F4BB}", "\u{1F469}\u{200D}\u{1F4BB}"),
        ("semi;colon\u{0B}vt", "semi;colon\u{0B}vt"),
        // A quote that starts a grapheme cluster (a joiner, a combining mark or a variation selector after it) is
        // still a quote to a CSV reader: doubled too. The first is the csv fuzz target's reproducer (shortened); left
        // single, its quote ended the field and ", slowly" became a cell of its own.
        ("War and Peace\"\u{200D}, slowly", "\"War and Peace\"\"\u{200D}, slowly\""),
        ("\"\u{301}=cmd()\"\u{301}", "\"\"\"\u{301}=cmd()\"\"\u{301}\""),
        ("5\"\u{FE0F},x", "\"5\"\"\u{FE0F},x\""),
    ]

    @Test("a field is quoted only for a comma, quote, CR, LF or edge space; quotes are doubled; the rest is untouched")
    func quoting() {
        for (value, encoded) in Self.tricky {
            // Compare bytes: Swift's == would call canonically equivalent text equal.
            #expect(Array(CSVWriter.encode(value).utf8) == Array(encoded.utf8), "\(value.debugDescription)")
        }
    }

    @Test("records end with CRLF; a lone empty field is written \"\"; the column count is checked")
    func records() throws {
        let writer = CSVWriter(columns: ["id", "name, full", "note"])
        #expect(writer.header == "id,\"name, full\",note\r\n")
        #expect(try writer.row(["1", "Ada", ""]) == "1,Ada,\r\n")
        #expect(try writer.row([.integer(2), .text(nil), .text("x\ny")]) == "2,,\"x\ny\"\r\n")
        #expect(throws: CSVWriter.ColumnCountMismatch(columns: 3, fields: 2)) { try writer.row(["1", "2"]) }
        #expect(throws: CSVWriter.ColumnCountMismatch(columns: 3, fields: 4)) { try writer.row(["1", "2", "3", "4"]) }

        let single = CSVWriter(columns: ["only"])
        #expect(try single.row([.empty]) == "\"\"\r\n")
        #expect(try single.row(["x"]) == "x\r\n")
        #expect(CSVWriter.record([String]()) == "\r\n")
    }

    @Test("dates, timestamps, booleans and numbers in the export's formats, with no locale")
    func formats() throws {
        #expect(CSVField.date(LocalDate(year: 2026, month: 11, day: 27)).text == "2026-11-27")
        #expect(CSVField.date(LocalDate(year: 33, month: 1, day: 2)).text == "0033-01-02")
        #expect(CSVField.date(nil).text == "")

        let quarterPastEight = Date(timeIntervalSince1970: 1_795_767_300)
        #expect(CSVField.timestamp(quarterPastEight).text == "2026-11-27T08:15:00Z")
        #expect(CSVField.timestamp(quarterPastEight + 37.25).text == "2026-11-27T08:15:37.250000Z")
        #expect(CSVField.timestamp(quarterPastEight + 0.000_001).text == "2026-11-27T08:15:00.000001Z")
        #expect(CSVField.timestamp(Date(timeIntervalSince1970: -0.5)).text == "1969-12-31T23:59:59.500000Z")
        #expect(CSVField.timestamp(Date(timeIntervalSince1970: 951_868_799)).text == "2000-02-29T23:59:59Z")
        #expect(CSVField.timestamp(nil).text == "")

        #expect(CSVField.bool(true).text == "true")
        #expect(CSVField.bool(false).text == "false")
        #expect(CSVField.bool(nil).text == "")

        #expect(CSVField.integer(-42).text == "-42")
        #expect(CSVField.integer(Int64.max).text == "9223372036854775807")
        #expect(CSVField.integer(UInt8(7)).text == "7")
        #expect(CSVField.integer(Int?.none).text == "")
        #expect(CSVField.double(0.1).text == "0.1")
        #expect(CSVField.double(-2.5).text == "-2.5")
        #expect(CSVField.double(1234567.0).text == "1234567.0")
        #expect(CSVField.double(2.5e-7).text == "2.5e-07")
        #expect(CSVField.decimal(Decimal(string: "12.50", locale: Locale(identifier: "en_US_POSIX"))).text == "12.5")
        #expect(CSVField.decimal(Decimal(string: "-1234567.891")).text == "-1234567.891")
    }

    @Test("far-off and non-finite instants are clamped to about ±285,000 years, not a crash (fuzz: csv)")
    func farOffTimestamps() {
        #expect(CSVField.timestamp(Date(timeIntervalSince1970: .infinity)).text == "287168-08-24T16:00:00Z")
        #expect(CSVField.timestamp(Date(timeIntervalSince1970: 1e13)).text == "287168-08-24T16:00:00Z")
        #expect(CSVField.timestamp(Date(timeIntervalSince1970: -.infinity)).text == "-283229-05-10T08:00:00Z")
        #expect(CSVField.timestamp(Date(timeIntervalSince1970: .nan)).text == "1970-01-01T00:00:00Z")
    }

    @Test("a file of tricky and random Unicode rows reads back field for field, byte for byte, with Python's csv")
    func pythonRoundTrip() async throws {
        let folder = try ScratchFolder("csv")
        defer { folder.remove() }

        let writer = CSVWriter(columns: ["value", "at", "number", "done", "also value"])
        var rows: [[String]] = [writer.columns]
        var text = writer.header
        var random = TestRandom(seed: 4180)
        // Pieces random text is made of: every quoting trigger, scripts, emoji sequences, combining marks.
        let alphabet = [
            ",", "\"", "\r", "\n", "\r\n", " ", "\t", "=", "+", "-", "@", "a", "Z", "0", ";", "'", "é", "e\u{301}",
            "ß", "Ω", "日本", "ع", "😀", "👍🏽", "\u{1F469}\u{200D}\u{1F4BB}", "\u{FEFF}", "\u{2028}", "\\",
            "\"\u{301}", "\"\u{200D}", "\u{301}", "\u{200D}",
        ]
        for (index, (value, _)) in Self.tricky.enumerated() {
            let fields: [CSVField] = [
                .text(value), .timestamp(Date(timeIntervalSince1970: Double(index) * 86_399.5)), .integer(index - 5),
                .bool(index % 2 == 0), .text(Self.tricky[Self.tricky.count - 1 - index].value),
            ]
            rows.append(fields.map(\.text))
            text += try writer.row(fields)
        }
        for _ in 0..<300 {
            let fields = (0..<5).map { _ in
                CSVField((0..<random.below(12)).map { _ in alphabet[random.below(alphabet.count)] }.joined())
            }
            rows.append(fields.map(\.text))
            text += try writer.row(fields)
        }
        let path = folder.path("round-trip.csv")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))

        // Python prints every field's UTF-8 in hex, one row per line, so the comparison is of exact bytes.
        let script = """
            import csv, sys
            with open(sys.argv[1], newline="", encoding="utf-8") as file:
                for row in csv.reader(file, strict=True):
                    print(" ".join(field.encode("utf-8").hex() or "-" for field in row))
            """
        let output = try await python(script, [path])
        let parsed = output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { line in
            line.split(separator: " ").map { $0 == "-" ? "" : String($0) }
        }
        let expected = rows.map { row in row.map { Hex.encode(Array($0.utf8)) } }
        #expect(parsed.count == expected.count)
        for (index, (got, want)) in zip(parsed, expected).enumerated() {
            #expect(got == want, "row \(index): \(rows[index])")
        }
    }
}
