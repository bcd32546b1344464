import HabitFlowCalendar
import Foundation
import HabitFlowHabits
import HabitFlowPostgres
import Testing

/// The calendar arithmetic under the week views, checked against Foundation's ISO 8601 calendar.
@Suite("ISO weeks, time zones and scores (no database)")
struct CalendarTests {
    @Test("IsoWeek agrees with Foundation's ISO 8601 calendar for every day of 1999 to 2040")
    func isoWeeksMatchFoundation() throws {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        let first = try #require(LocalDate(year: 1999, month: 1, day: 1))
        let last = try #require(LocalDate(year: 2040, month: 12, day: 31))
        for days in first.daysSinceEpoch...last.daysSinceEpoch {
            let date = LocalDate(daysSinceEpoch: days)
            let components = calendar.dateComponents(
                [.yearForWeekOfYear, .weekOfYear, .weekday], from: Date(timeIntervalSince1970: Double(days) * 86_400))
            let week = IsoWeek(containing: date)
            #expect(week.year == components.yearForWeekOfYear && week.week == components.weekOfYear, "\(date)")
            // Foundation: 1 = Sunday ... 7 = Saturday.
            #expect(date.isoWeekday == ((components.weekday ?? 0) + 5) % 7 + 1, "\(date)")
            #expect(IsoWeek(year: week.year, week: week.week) == week)
        }
    }

    @Test("week names, long years and week arithmetic")
    func weekBasics() throws {
        let week = try #require(IsoWeek(year: 2026, week: 1))
        #expect(week.description == "2026-W01")
        #expect(week.monday == LocalDate(year: 2025, month: 12, day: 29))
        #expect(week.sunday == LocalDate(year: 2026, month: 1, day: 4))
        #expect(IsoWeek.weeks(inYear: 2026) == 53)
        #expect(IsoWeek.weeks(inYear: 2025) == 52)
        #expect(IsoWeek(year: 2025, week: 53) == nil)
        #expect(IsoWeek(year: 2026, week: 53)?.sunday == LocalDate(year: 2027, month: 1, day: 3))
        #expect(IsoWeek(year: 2026, week: 0) == nil)
        #expect(week.adding(weeks: -1).description == "2025-W52")
        #expect(week.weeks(until: week.adding(weeks: 60)) == 60)
    }

    @Test("time zones: IANA names only; the local date follows DST")
    func timeZones() throws {
        #expect(UserTimeZone(named: "Europe/Berlin") != nil)
        #expect(UserTimeZone(named: "UTC") != nil)
        for bad in ["", "GMT+2", "UTC-05:00", "+02:00", "Not/AZone", String(repeating: "A", count: 65)] {
            #expect(UserTimeZone(named: bad) == nil, "\(bad)")
        }
        let newYork = try #require(UserTimeZone(named: "America/New_York"))
        let formatter = ISO8601DateFormatter()
        let springForward = try #require(formatter.date(from: "2026-03-09T03:59:00Z"))
        #expect(newYork.localDate(at: springForward) == LocalDate(year: 2026, month: 3, day: 8))
        #expect(newYork.localDate(at: springForward.addingTimeInterval(60)) == LocalDate(year: 2026, month: 3, day: 9))
    }

    @Test("the local date agrees with Foundation's calendar in odd zones, across DST changes, for two years")
    func localDatesMatchFoundation() throws {
        // Offsets of +14, -11, half and quarter hours, a 30-minute DST shift, and ordinary DST on both hemispheres.
        let zones = [
            "Pacific/Kiritimati", "Pacific/Pago_Pago", "America/St_Johns", "Asia/Kathmandu", "Australia/Lord_Howe",
            "Europe/Berlin", "America/Santiago", "UTC",
        ]
        let start = try #require(ISO8601DateFormatter().date(from: "2026-01-01T00:00:00Z"))
        for name in zones {
            let zone = try #require(UserTimeZone(named: name))
            var calendar = Calendar(identifier: .iso8601)
            calendar.timeZone = try #require(TimeZone(identifier: name))
            // Every 97 minutes for two years: each hour of the day in every zone, both sides of each transition.
            for step in 0..<(2 * 365 * 24 * 60 / 97) {
                let instant = start.addingTimeInterval(Double(step) * 97 * 60)
                let components = calendar.dateComponents([.year, .month, .day], from: instant)
                let expected = LocalDate(year: components.year ?? 0, month: components.month ?? 0, day: components.day ?? 0)
                #expect(zone.localDate(at: instant) == expected, "\(name) at \(instant)")
            }
        }
    }

    @Test("scores: \"X% (Y/Z habits)\", rounded half up; X/Y per habit")
    func scores() {
        #expect(WeeklyScore(met: 2, total: 3).display == "67% (2/3 habits)")
        #expect(WeeklyScore(met: 1, total: 8).display == "13% (1/8 habits)")  // 12.5 rounds up
        #expect(WeeklyScore(met: 1, total: 3).percent == 33)
        #expect(WeeklyScore(met: 0, total: 0).display == "0% (0/0 habits)")
        let tally = HabitWeekTally(habitID: UUID(), categoryID: nil, target: 7, completions: 8)
        #expect(tally.progress == "8/7")
        #expect(tally.met)
        #expect(tally.percent == 100)
        #expect(HabitWeekTally(habitID: UUID(), categoryID: nil, target: 3, completions: 2).percent == 66)
    }
}
