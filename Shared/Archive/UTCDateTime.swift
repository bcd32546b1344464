internal import HabitFlowCalendar
internal import Foundation

/// A `Date`'s calendar fields in UTC (proleptic Gregorian), to the microsecond: what CSV timestamps and ZIP's DOS
/// times are made of.
struct UTCDateTime: Equatable {
    var date: LocalDate
    var hour: Int
    var minute: Int
    var second: Int
    var microsecond: Int

    init(_ value: Date) {
        // Microseconds, Postgres timestamptz's precision; far-off or non-finite dates are clamped to ±285,000 years
        // (``clampSeconds``), so that their microseconds fit an Int64.
        let seconds = value.timeIntervalSince1970
        let clamped = seconds.isNaN ? 0 : min(max(seconds, -Self.clampSeconds), Self.clampSeconds)
        let micros = Int64((clamped * 1_000_000).rounded())
        let (days, microsOfDay) = Self.floorDivide(micros, 86_400_000_000)
        date = LocalDate(daysSinceEpoch: Int(days))
        let secondOfDay = Int(microsOfDay / 1_000_000)
        hour = secondOfDay / 3600
        minute = secondOfDay / 60 % 60
        second = secondOfDay % 60
        microsecond = Int(microsOfDay % 1_000_000)
    }

    /// The farthest instant from 1970, either way, that is told apart: ±9e12 seconds.
    static let clampSeconds: Double = 9e12

    /// Quotient rounded down and a non-negative remainder (dates before 1970 count backwards).
    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }
}
