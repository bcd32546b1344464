public import Foundation
public import HabitFlowCalendar

/// Records of one CSV file (RFC 4180) with a fixed list of columns, as UTF-8 text.
///
/// Fields are separated by commas and every record, the header included, ends with CRLF. A field is enclosed in double
/// quotes when it contains a comma, a double quote, CR or LF, or begins or ends with a space or a tab (RFC 4180 keeps
/// such spaces, but some readers trim them from unquoted fields); a double quote inside is doubled. Everything else is
/// written as it is, in UTF-8 without a byte order mark: no Unicode normalisation, no escaping of other control
/// characters. The only exception: a record of one empty field is written `""`, since an empty line is no record
/// to most readers.
///
/// Values are not changed to defuse spreadsheet formulas (a field beginning with `=`, `+`, `-` or `@`): an export
/// gives users back exactly what they typed, a reader such as Python's `csv` gets every field byte for byte, and the
/// usual defence (a leading `'`) would corrupt negative numbers and any text that starts with those characters for
/// every program that is not a spreadsheet. The only person who opens the file is the one who wrote the values.
///
/// ```swift
/// let habits = CSVWriter(columns: ["id", "name", "created_at", "archived"])
/// var text = habits.header
/// text += try habits.row([.text(habit.id), .text(habit.name), .timestamp(habit.createdAt), .bool(habit.archived)])
/// ```
public struct CSVWriter: Sendable {
    /// A row whose number of fields is not the number of columns.
    public struct ColumnCountMismatch: Error, Sendable, Equatable, CustomStringConvertible {
        public var columns: Int
        public var fields: Int

        public init(columns: Int, fields: Int) {
            self.columns = columns
            self.fields = fields
        }

        public var description: String { "a CSV row has \(fields) fields for \(columns) columns" }
    }

    /// The column names, in order.
    public let columns: [String]

    public init(columns: [String]) {
        self.columns = columns
    }

    /// The header record: the column names, ended with CRLF.
    public var header: String { Self.record(columns) }

    /// One record: `fields` (one per column), ended with CRLF.
    public func row(_ fields: [CSVField]) throws(ColumnCountMismatch) -> String {
        guard fields.count == columns.count else {
            throw ColumnCountMismatch(columns: columns.count, fields: fields.count)
        }
        return Self.record(fields.lazy.map(\.text))
    }

    /// One record of `fields`, each quoted where it needs to be, ended with CRLF.
    public static func record(_ fields: some Collection<String>) -> String {
        if fields.count == 1, fields.first?.isEmpty == true { return "\"\"\r\n" }
        var line = ""
        for (index, field) in fields.enumerated() {
            if index > 0 { line += "," }
            line += encode(field)
        }
        line += "\r\n"
        return line
    }

    /// `field` as it appears in a record: as it is, or enclosed in double quotes with its double quotes doubled.
    public static func encode(_ field: String) -> String {
        guard needsQuotes(field) else { return field }
        // Scalar by scalar, as a CSV reader sees the text: Swift compares `Character`s, and a quote followed by a
        // combining mark, a joiner or a variation selector is one `Character` that is no quote.
        var quoted = String.UnicodeScalarView()
        quoted.append("\"")
        for scalar in field.unicodeScalars {
            quoted.append(scalar)
            if scalar == "\"" { quoted.append(scalar) }
        }
        quoted.append("\"")
        return String(quoted)
    }

    private static func needsQuotes(_ field: String) -> Bool {
        let utf8 = field.utf8
        guard let first = utf8.first, let last = utf8.last else { return false }
        if first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") || last == UInt8(ascii: " ")
            || last == UInt8(ascii: "\t")
        {
            return true
        }
        return utf8.contains { byte in
            byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\r")
                || byte == UInt8(ascii: "\n")
        }
    }
}

/// The text of one CSV field, before quoting, in the formats of the export.
///
/// `nil` (SQL NULL) is an empty field for every kind of value.
public struct CSVField: Hashable, Sendable, ExpressibleByStringLiteral {
    /// The field's text, unquoted.
    public var text: String

    public init(_ text: String) {
        self.text = text
    }

    public init(stringLiteral text: String) {
        self.text = text
    }

    /// An empty field.
    public static let empty = CSVField("")

    /// Text as it is.
    public static func text(_ value: String?) -> CSVField {
        CSVField(value ?? "")
    }

    /// An integer in decimal digits, with a leading `-` when negative (no grouping, no locale).
    public static func integer(_ value: (some BinaryInteger)?) -> CSVField {
        CSVField(value.map { String($0) } ?? "")
    }

    /// A floating-point number in the shortest form that reads back as the same `Double` (`0.1`, `2.5e-07`, `1e+16`),
    /// as Swift prints it: a `.` for the decimal point, no locale. Non-finite values are `nan`, `inf` and `-inf`,
    /// which Python's `float` reads too.
    public static func double(_ value: Double?) -> CSVField {
        CSVField(value.map { $0.description } ?? "")
    }

    /// A decimal number (Postgres `numeric`) in plain digits with a `.`, no locale; `Decimal` keeps no trailing zeros,
    /// so `12.50` is written `12.5`.
    public static func decimal(_ value: Decimal?) -> CSVField {
        CSVField(value.map { $0.description } ?? "")
    }

    /// `true` or `false`.
    public static func bool(_ value: Bool?) -> CSVField {
        CSVField(value.map { $0 ? "true" : "false" } ?? "")
    }

    /// An ISO 8601 calendar date, `2026-11-27`.
    public static func date(_ value: LocalDate?) -> CSVField {
        CSVField(value?.description ?? "")
    }

    /// A UTC timestamp in RFC 3339 (ISO 8601) form, `2026-11-27T08:15:00Z`; when the time has a fraction of a second,
    /// it is written to the microsecond (Postgres' precision), always six digits: `2026-11-27T08:15:00.250000Z`.
    /// Instants more than about 285,000 years from 1970, and non-finite ones, are clamped to that range.
    public static func timestamp(_ value: Date?) -> CSVField {
        guard let value else { return .empty }
        let time = UTCDateTime(value)
        var text = "\(time.date)T\(pad(time.hour)):\(pad(time.minute)):\(pad(time.second))"
        if time.microsecond != 0 { text += "." + pad(time.microsecond, 6) }
        return CSVField(text + "Z")
    }

    private static func pad(_ value: Int, _ width: Int = 2) -> String {
        CivilCalendar.pad(value, width)
    }
}
