/// An ISO 8601 week: Monday to Sunday, numbered within its week-numbering year (the year of its Thursday), named
/// like `2026-W03`.
///
/// Weeks are computed from calendar dates alone, so they do not depend on any time zone: the user's zone only
/// decides which date is "today" (``UserClock``). A DST change shortens or lengthens a week by an hour but never
/// changes its seven dates.
public struct IsoWeek: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let year: Int
    public let week: Int
    /// The week's Monday.
    public let monday: LocalDate

    /// `nil` when the week does not exist (week 0, week 53 of a 52-week year, a year outside 1...9999).
    public init?(year: Int, week: Int) {
        guard (1...9999).contains(year), week >= 1, week <= IsoWeek.weeks(inYear: year),
            let januaryFourth = LocalDate(year: year, month: 1, day: 4)
        else { return nil }
        self.year = year
        self.week = week
        self.monday = januaryFourth.mondayOfWeek.adding(days: (week - 1) * 7)
    }

    /// The week a date lies in.
    public init(containing date: LocalDate) {
        let monday = date.mondayOfWeek
        let thursday = monday.adding(days: 3)
        self.year = thursday.year
        self.week = (thursday.dayOfYear - 1) / 7 + 1
        self.monday = monday
    }

    public var sunday: LocalDate { monday.adding(days: 6) }

    /// Its seven dates, Monday first.
    public var dates: [LocalDate] { (0..<7).map { monday.adding(days: $0) } }

    public func contains(_ date: LocalDate) -> Bool { date >= monday && date <= sunday }

    /// The week `count` weeks later (earlier for a negative count).
    public func adding(weeks count: Int) -> IsoWeek { IsoWeek(containing: monday.adding(days: count * 7)) }

    /// How many weeks from `self` to `other` (negative when `other` is earlier).
    public func weeks(until other: IsoWeek) -> Int { (other.monday.daysSinceEpoch - monday.daysSinceEpoch) / 7 }

    /// `2026-W03`
    public var description: String {
        let week = self.week < 10 ? "0\(self.week)" : "\(self.week)"
        return "\(String(repeating: "0", count: max(0, 4 - String(year).count)))\(year)-W\(week)"
    }

    public static func < (lhs: IsoWeek, rhs: IsoWeek) -> Bool { lhs.monday < rhs.monday }

    /// 52 or 53: a year has 53 ISO weeks when its December 28th lies in week 53.
    public static func weeks(inYear year: Int) -> Int {
        guard let december28 = LocalDate(year: year, month: 12, day: 28) else { return 52 }
        return (december28.mondayOfWeek.adding(days: 3).dayOfYear - 1) / 7 + 1
    }
}

extension LocalDate {
    /// ISO weekday: 1 = Monday ... 7 = Sunday.
    public var isoWeekday: Int {
        // 1970-01-01 was a Thursday (weekday 4).
        let offset = (daysSinceEpoch + 3) % 7
        return (offset < 0 ? offset + 7 : offset) + 1
    }

    public var mondayOfWeek: LocalDate { adding(days: 1 - isoWeekday) }

    public func adding(days: Int) -> LocalDate { LocalDate(daysSinceEpoch: daysSinceEpoch + days) }

    /// 1 for January 1st.
    public var dayOfYear: Int {
        guard let januaryFirst = LocalDate(year: year, month: 1, day: 1) else { return 1 }
        return daysSinceEpoch - januaryFirst.daysSinceEpoch + 1
    }

    /// Days from `self` to `other` (negative when `other` is earlier).
    public func days(until other: LocalDate) -> Int { other.daysSinceEpoch - daysSinceEpoch }
}
