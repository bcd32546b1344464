internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowHabitsProtos
internal import HabitFlowServiceAPI

/// The habits service's own field rules, on top of the shared checks.
extension RequestValidator {
    /// An optional unit; empty means none.
    mutating func unit(_ raw: String, field: String) -> String? {
        optionalName(raw, field: field, maximumLength: HabitRules.maximumUnitLength)
    }

    /// 0 to `maximum` UUIDs, no repeats (the shared ``ids(_:field:maximum:)`` wants at least one).
    mutating func optionalIDs(_ texts: [String], field: String, maximum: Int) -> [UUID] {
        guard texts.count <= maximum else {
            reject(field, "must hold at most \(maximum) ids, got \(texts.count)")
            return []
        }
        return texts.isEmpty ? [] : ids(texts, field: field, maximum: maximum)
    }

    /// Who holds units (SetUnitHolds), taken as given: 1 to `maximumLength` characters (Unicode code points, as the
    /// database counts), without control characters.
    mutating func holder(_ raw: String, field: String, maximumLength: Int) -> String {
        if raw.isEmpty {
            reject(field, "is required")
        } else if raw.unicodeScalars.count > maximumLength {
            reject(field, "must be at most \(maximumLength) characters, got \(raw.unicodeScalars.count)")
        } else if raw.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            reject(field, "must not contain control characters")
        }
        return raw
    }

    mutating func weeklyTarget(_ value: Int32, field: String) -> Int {
        guard HabitRules.weeklyTargets.contains(Int(value)) else {
            reject(
                field,
                "must be from \(HabitRules.weeklyTargets.lowerBound) to \(HabitRules.weeklyTargets.upperBound) times a week, got \(value)")
            return HabitRules.defaultWeeklyTarget
        }
        return Int(value)
    }

    /// An entry's value: finite, 0 to 1,000,000,000 (stored with six decimals).
    mutating func entryValue(_ value: Double, field: String) -> Decimal {
        guard value.isFinite, value >= 0, value <= HabitRules.maximumEntryValue,
            let decimal = Decimal(string: String(value), locale: Locale(identifier: "en_US_POSIX"))
        else {
            reject(field, "must be a number from 0 to 1000000000")
            return 1
        }
        return decimal
    }

    // MARK: Calendar messages

    mutating func date(_ date: Habitflow_Habits_V1_LocalDate, field: String) -> LocalDate {
        self.date(year: date.year, month: date.month, day: date.day, field: field)
    }

    /// A date the caller had to set.
    mutating func requiredDate(_ date: Habitflow_Habits_V1_LocalDate, isSet: Bool, field: String) -> LocalDate {
        guard isSet else {
            reject(field, "is required")
            return LocalDate(daysSinceEpoch: 0)
        }
        return self.date(date, field: field)
    }

    mutating func week(_ week: Habitflow_Habits_V1_IsoWeek, field: String) -> IsoWeek {
        self.week(year: week.year, week: week.week, field: field)
    }
}
