public import Foundation
internal import HabitFlowCrypto

/// A Swift value that can be sent as a statement parameter.
public protocol PostgresEncodable: Sendable {
    /// The type the parameter is declared with when the statement is prepared.
    static var postgresType: PostgresType { get }
    func postgresBind() -> PostgresBind
}

/// A Swift value that a result column can be decoded into.
///
/// Results arrive in Postgres's text format (the session runs with `DateStyle=ISO` and `TimeZone=UTC`).
public protocol PostgresDecodable: Sendable {
    /// Decodes a non-NULL value.
    init(postgresCell cell: PostgresCell) throws(PostgresError)
    /// What SQL NULL decodes to; `nil` means NULL is an error (only `Optional` accepts it).
    static var postgresNull: Self? { get }
}

extension PostgresDecodable {
    public static var postgresNull: Self? { nil }
}

public typealias PostgresCodable = PostgresEncodable & PostgresDecodable

/// One non-NULL result value in text format.
public struct PostgresCell: Sendable {
    public var bytes: ArraySlice<UInt8>
    public var type: PostgresType
    public var columnName: String

    @usableFromInline init(bytes: ArraySlice<UInt8>, type: PostgresType, columnName: String) {
        self.bytes = bytes
        self.type = type
        self.columnName = columnName
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    func failure(_ swiftType: Any.Type, _ reason: String = "") -> PostgresError {
        PostgresError(
            kind: .decodingFailed,
            message: "column \"\(columnName)\" (\(type)) cannot be decoded as \(swiftType)\(reason.isEmpty ? "" : ": \(reason)")")
    }
}

// MARK: - Optional (NULL)

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public static var postgresType: PostgresType { Wrapped.postgresType }
    public func postgresBind() -> PostgresBind {
        switch self {
        case .some(let value): value.postgresBind()
        case .none: PostgresBind(type: Wrapped.postgresType, bytes: nil)
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        self = .some(try Wrapped(postgresCell: cell))
    }
    public static var postgresNull: Self? { .some(.none) }
}

// MARK: - Text

extension String: PostgresCodable {
    /// Unspecified, so the server infers the parameter's type from where it is used: a string can fill a text,
    /// varchar, uuid or enum column alike (as an untyped literal would).
    public static var postgresType: PostgresType { .unspecified }
    public func postgresBind() -> PostgresBind { .text(self, type: .unspecified) }
    /// Any column decodes as its text representation.
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = cell.text }
}

// MARK: - Integers and booleans

protocol PostgresInteger: FixedWidthInteger, PostgresCodable {}

extension PostgresInteger {
    public func postgresBind() -> PostgresBind { .text(String(self), type: Self.postgresType) }
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        guard let value = Self(cell.text) else { throw cell.failure(Self.self, "not an integer in range") }
        self = value
    }
}

extension Int16: PostgresInteger { public static var postgresType: PostgresType { .int2 } }
extension Int32: PostgresInteger { public static var postgresType: PostgresType { .int4 } }
extension Int64: PostgresInteger { public static var postgresType: PostgresType { .int8 } }
extension Int: PostgresInteger { public static var postgresType: PostgresType { .int8 } }

extension Bool: PostgresCodable {
    public static var postgresType: PostgresType { .bool }
    public func postgresBind() -> PostgresBind { .text(self ? "t" : "f", type: .bool) }
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        switch cell.bytes.first {
        case UInt8(ascii: "t"): self = true
        case UInt8(ascii: "f"): self = false
        default: throw cell.failure(Bool.self)
        }
    }
}

// MARK: - numeric

extension Decimal: PostgresCodable {
    public static var postgresType: PostgresType { .numeric }

    public func postgresBind() -> PostgresBind {
        .text(isNaN ? "NaN" : description, type: .numeric)
    }

    /// - Important: `Decimal` holds 38 significant digits; a value with more throws rather than round. Use
    ///   ``PostgresNumeric`` for exact arbitrary-precision text.
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        if let value = Self(postgresNumericText: cell.bytes) {
            self = value
            return
        }
        let text = cell.text
        if text == "NaN" {
            self = .nan
            return
        }
        // Leading and trailing zeros live in the exponent; every other digit must fit the 38-digit mantissa.
        let digits = text.utf8.filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        let significant = digits.drop { $0 == UInt8(ascii: "0") }.reversed().drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= 38, let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
            !value.isNaN
        else {
            throw cell.failure(Decimal.self, "more than 38 significant digits or out of Decimal's range")
        }
        self = value
    }
}

extension Decimal {
    /// Postgres's text of a `numeric` with at most 19 significant digits (`-123.450000`), without Foundation's
    /// locale-aware parser: about a third of its time, for the amounts every entry read decodes. `nil` for anything
    /// else (NaN, infinities, more digits), which the general path decodes or refuses.
    init?(postgresNumericText text: ArraySlice<UInt8>) {
        var digits = text[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty else { return nil }
        var significand: UInt64 = 0
        var significantDigits = 0
        var scale: Int32 = 0
        var afterPoint = false
        for byte in digits {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard significantDigits < 19 else { return nil }
                significand = significand * 10 + UInt64(byte - UInt8(ascii: "0"))
                if significand > 0 { significantDigits += 1 }
                if afterPoint { scale += 1 }
            case UInt8(ascii: ".") where !afterPoint:
                afterPoint = true
            default:
                return nil
            }
        }
        self.init(sign: negative ? .minus : .plus, exponent: -Int(scale), significand: Decimal(significand))
    }
}

/// A `numeric` value as exact decimal text, for precision beyond `Decimal`'s 38 digits.
public struct PostgresNumeric: PostgresCodable, Hashable, CustomStringConvertible {
    public var text: String
    public init(_ text: String) { self.text = text }
    public static var postgresType: PostgresType { .numeric }
    public func postgresBind() -> PostgresBind { .text(text, type: .numeric) }
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { text = cell.text }
    public var description: String { text }
}

// MARK: - uuid, bytea, jsonb

extension UUID: PostgresCodable {
    public static var postgresType: PostgresType { .uuid }
    public func postgresBind() -> PostgresBind { .text(lowercasedString, type: .uuid) }
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        guard let value = UUID(canonicalText: cell.bytes) else {
            throw cell.failure(UUID.self)
        }
        self = value
    }
}

extension Data: PostgresCodable {
    public static var postgresType: PostgresType { .bytea }
    /// Sent in binary format: the raw bytes, no escaping.
    public func postgresBind() -> PostgresBind { PostgresBind(type: .bytea, format: .binary, bytes: Array(self)) }
    /// Text format of bytea is `\x` followed by hex digits (the default `bytea_output`).
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        let bytes = cell.bytes
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\\"), bytes.dropFirst().first == UInt8(ascii: "x"),
            bytes.count % 2 == 0
        else { throw cell.failure(Data.self, "expected hex bytea output") }
        guard let decoded = Hex.decode(bytes.dropFirst(2)) else { throw cell.failure(Data.self, "bad hex digit") }
        self = Data(decoded)
    }
}

/// A `jsonb` value as JSON text. The server normalizes it (key order, spacing), so compare decoded values.
public struct PostgresJSONB: PostgresCodable, Hashable {
    public var rawJSON: String

    public init(rawJSON: String) { self.rawJSON = rawJSON }

    /// Encodes `value` with Foundation's `JSONEncoder`.
    public init(encoding value: some Encodable) throws {
        rawJSON = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    /// Decodes the JSON with Foundation's `JSONDecoder`.
    public func decode<T: Decodable>(as type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(rawJSON.utf8))
    }

    public static var postgresType: PostgresType { .jsonb }
    public func postgresBind() -> PostgresBind { .text(rawJSON, type: .jsonb) }
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { rawJSON = cell.text }
}

// MARK: - Arrays

/// An element type of one-dimensional arrays (`text[]`, `uuid[]`, `int8[]`, ...).
public protocol PostgresArrayElement: PostgresCodable {
    static var postgresArrayType: PostgresType { get }
}

extension String: PostgresArrayElement { public static var postgresArrayType: PostgresType { .textArray } }
extension UUID: PostgresArrayElement { public static var postgresArrayType: PostgresType { .uuidArray } }
extension Int64: PostgresArrayElement { public static var postgresArrayType: PostgresType { .int8Array } }
extension Int: PostgresArrayElement { public static var postgresArrayType: PostgresType { .int8Array } }
extension Int32: PostgresArrayElement { public static var postgresArrayType: PostgresType { .int4Array } }
extension Int16: PostgresArrayElement { public static var postgresArrayType: PostgresType { .int2Array } }
extension Bool: PostgresArrayElement { public static var postgresArrayType: PostgresType { .boolArray } }

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public static var postgresType: PostgresType { Element.postgresArrayType }

    /// Array literal text: every element double-quoted with `\` and `"` escaped, so no element value is special.
    public func postgresBind() -> PostgresBind {
        var text: [UInt8] = [UInt8(ascii: "{")]
        for (index, element) in enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            text.append(UInt8(ascii: "\""))
            for byte in element.postgresBind().bytes ?? [] {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { text.append(UInt8(ascii: "\\")) }
                text.append(byte)
            }
            text.append(UInt8(ascii: "\""))
        }
        text.append(UInt8(ascii: "}"))
        return PostgresBind(type: Element.postgresArrayType, bytes: text)
    }
}

extension Array: PostgresDecodable where Element: PostgresArrayElement {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        let elements: [[UInt8]]
        do {
            elements = try PostgresArrayParser.parse(cell.bytes)
        } catch {
            throw cell.failure([Element].self, error.reason)
        }
        self = []
        reserveCapacity(elements.count)
        for element in elements {
            let elementCell = PostgresCell(bytes: element[...], type: .unspecified, columnName: cell.columnName)
            append(try Element(postgresCell: elementCell))
        }
    }
}

struct PostgresArrayParseError: Error { var reason: String }

/// Parses the text output of a one-dimensional array, `{a,"b c",NULL}`. NULL elements are rejected (the supported
/// Swift arrays have non-optional elements).
enum PostgresArrayParser {
    static func parse(_ bytes: ArraySlice<UInt8>) throws(PostgresArrayParseError) -> [[UInt8]] {
        var index = bytes.startIndex
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "{") else {
            throw PostgresArrayParseError(reason: "expected '{' (only one-dimensional arrays with lower bound 1)")
        }
        index += 1
        var elements: [[UInt8]] = []
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "}") { return elements }
        while index < bytes.endIndex {
            var element: [UInt8] = []
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                while index < bytes.endIndex, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    guard index < bytes.endIndex else { break }
                    element.append(bytes[index])
                    index += 1
                }
                guard index < bytes.endIndex else { throw PostgresArrayParseError(reason: "unterminated quote") }
                index += 1
            } else {
                while index < bytes.endIndex, bytes[index] != UInt8(ascii: ","), bytes[index] != UInt8(ascii: "}") {
                    if bytes[index] == UInt8(ascii: "{") {
                        throw PostgresArrayParseError(reason: "multi-dimensional arrays are not supported")
                    }
                    element.append(bytes[index])
                    index += 1
                }
                if element == Array("NULL".utf8) { throw PostgresArrayParseError(reason: "NULL element") }
            }
            elements.append(element)
            guard index < bytes.endIndex else { break }
            if bytes[index] == UInt8(ascii: "}") { return elements }
            index += 1  // ","
        }
        throw PostgresArrayParseError(reason: "unterminated array")
    }
}
