public import Foundation
public import HabitFlowCalendar

extension LocalDate: PostgresCodable {
    public static var postgresType: PostgresType { .date }
    public func postgresBind() -> PostgresBind { .text(postgresText, type: .date) }
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        var scanner = CivilScanner(cell.bytes)
        guard let parts = scanner.civilDate() else {
            throw cell.failure(LocalDate.self, "expected YYYY-MM-DD[ BC] (infinity is not a date)")
        }
        let isBC = scanner.skipBCSuffix()
        guard scanner.isAtEnd, let date = LocalDate(postgresYear: parts.year, isBC: isBC, month: parts.month, day: parts.day)
        else { throw cell.failure(LocalDate.self, "not a valid date") }
        self = date
    }
}

/// `timestamptz` is Foundation's `Date`: an instant, exchanged with Postgres in UTC and rounded to Postgres's
/// microsecond resolution. (`timestamp` without time zone decodes as if it were UTC.)
///
/// A `Date` is a `Double` of seconds since 2001, exact to the microsecond for a few centuries around now; far
/// outside that the value is rounded to the nearest representable instant.
extension Date: PostgresCodable {
    public static var postgresType: PostgresType { .timestamptz }

    public func postgresBind() -> PostgresBind {
        let micros = Int64((timeIntervalSince1970 * 1_000_000).rounded())
        let (days, microOfDay) = micros.floorDivided(by: 86_400_000_000)
        let date = LocalDate(daysSinceEpoch: Int(days))
        let seconds = microOfDay / 1_000_000
        let fraction = microOfDay % 1_000_000
        var text = "\(CivilCalendar.pad(date.year <= 0 ? 1 - date.year : date.year, 4))-\(CivilCalendar.pad(date.month, 2))"
        text += "-\(CivilCalendar.pad(date.day, 2)) \(CivilCalendar.pad(Int(seconds / 3600), 2)):"
        text += "\(CivilCalendar.pad(Int(seconds / 60 % 60), 2)):\(CivilCalendar.pad(Int(seconds % 60), 2))"
        text += ".\(CivilCalendar.pad(Int(fraction), 6))+00\(date.year <= 0 ? " BC" : "")"
        return .text(text, type: .timestamptz)
    }

    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        var scanner = CivilScanner(cell.bytes)
        guard let date = scanner.civilDate(), scanner.skip(" "),
            let hour = scanner.integer(), scanner.skip(":"), let minute = scanner.integer(), scanner.skip(":"),
            let second = scanner.integer()
        else { throw cell.failure(Date.self, "expected YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM]][ BC]") }
        var micros = 0
        if scanner.skip(".") {
            var digits = 0
            while let digit = scanner.digit() {
                if digits < 6 { micros = micros * 10 + digit }
                digits += 1
            }
            for _ in digits..<max(digits, 6) { micros *= 10 }
        }
        var offsetSeconds = 0
        if let sign = scanner.sign() {
            guard let hours = scanner.integer() else { throw cell.failure(Date.self, "bad UTC offset") }
            var offset = hours * 3600
            if scanner.skip(":"), let minutes = scanner.integer() { offset += minutes * 60 }
            if scanner.skip(":"), let seconds = scanner.integer() { offset += seconds }
            offsetSeconds = sign * offset
        }
        let isBC = scanner.skipBCSuffix()
        guard scanner.isAtEnd, let civil = LocalDate(postgresYear: date.year, isBC: isBC, month: date.month, day: date.day)
        else { throw cell.failure(Date.self, "trailing text (infinity is not a Date)") }
        let secondsSinceEpoch = Int64(civil.daysSinceEpoch) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
            - Int64(offsetSeconds)
        // Whole seconds and microseconds are added separately so the Double keeps what precision it can.
        self = Date(timeIntervalSince1970: Double(secondsSinceEpoch) + Double(micros) / 1_000_000)
    }
}

extension Int64 {
    /// Division rounding toward negative infinity, with a non-negative remainder.
    func floorDivided(by divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = (self >= 0 ? self : self - divisor + 1) / divisor
        return (quotient, self - quotient * divisor)
    }
}


/// Reads Postgres's ISO date/time output.
struct CivilScanner {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    var isAtEnd: Bool { index == bytes.endIndex }

    mutating func digit() -> Int? {
        guard index < bytes.endIndex, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") else {
            return nil
        }
        defer { index += 1 }
        return Int(bytes[index] - UInt8(ascii: "0"))
    }

    mutating func integer() -> Int? {
        guard var value = digit() else { return nil }
        var count = 1
        while let next = digit() {
            value = value * 10 + next
            count += 1
            if count > 12 { return nil }
        }
        return value
    }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: character) else { return false }
        index += 1
        return true
    }

    mutating func sign() -> Int? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }

    /// `YYYY-MM-DD` as written (the year as AD or BC, see ``skipBCSuffix()``).
    mutating func civilDate() -> (year: Int, month: Int, day: Int)? {
        guard let year = integer(), skip("-"), let month = integer(), skip("-"), let day = integer() else { return nil }
        return (year, month, day)
    }

    /// Consumes a trailing ` BC`, if present.
    mutating func skipBCSuffix() -> Bool {
        guard bytes[index...].elementsEqual(" BC".utf8) else { return false }
        index = bytes.endIndex
        return true
    }
}

extension LocalDate {
    /// Postgres's ISO text: the year as AD/BC.
    var postgresText: String {
        let era = year <= 0 ? " BC" : ""
        return "\(CivilCalendar.pad(year <= 0 ? 1 - year : year, 4))-\(CivilCalendar.pad(month, 2))-\(CivilCalendar.pad(day, 2))\(era)"
    }

    /// From Postgres's AD/BC year numbering.
    init?(postgresYear year: Int, isBC: Bool, month: Int, day: Int) {
        guard year >= 1 else { return nil }
        self.init(year: isBC ? 1 - year : year, month: month, day: day)
    }
}
