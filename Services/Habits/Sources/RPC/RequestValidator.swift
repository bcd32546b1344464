internal import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowPostgres
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// Checks a request's fields and collects every violation, so one INVALID_ARGUMENT names them all.
///
/// Each check returns the parsed value, or a placeholder when the field is invalid; call ``check()`` before using
/// what the checks returned.
struct RequestValidator {
    private(set) var violations: [FieldViolation] = []

    mutating func reject(_ field: String, _ description: String) {
        violations.append(FieldViolation(field: field, description: description))
    }

    /// Throws INVALID_ARGUMENT when any check failed.
    func check() throws {
        if !violations.isEmpty { throw RPCError.invalidArgument(violations) }
    }

    // MARK: Ids

    /// A required UUID.
    mutating func id(_ text: String, field: String) -> UUID {
        guard !text.isEmpty else {
            reject(field, "is required")
            return UUID.min
        }
        return optionalID(text, field: field) ?? UUID.min
    }

    /// A UUID or nothing (empty).
    mutating func optionalID(_ text: String, field: String) -> UUID? {
        guard !text.isEmpty else { return nil }
        guard let id = UUID(canonical: text) else {
            reject(field, "must be a UUID, for example 3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c")
            return nil
        }
        return id
    }

    /// An optional client-generated id for an idempotent create (not the nil UUID).
    mutating func clientID(_ text: String, field: String) -> UUID? {
        let id = optionalID(text, field: field)
        if id == UUID.min {
            reject(field, "must not be the nil UUID")
            return nil
        }
        return id
    }

    /// 1 to `maximum` UUIDs, no repeats.
    mutating func ids(_ texts: [String], field: String, maximum: Int) -> [UUID] {
        guard (1...maximum).contains(texts.count) else {
            reject(field, "must hold 1 to \(maximum) ids, got \(texts.count)")
            return []
        }
        var ids: [UUID] = []
        var seen: Set<UUID> = []
        for (index, text) in texts.enumerated() {
            let id = self.id(text, field: "\(field)[\(index)]")
            if !seen.insert(id).inserted, id != UUID.min { reject("\(field)[\(index)]", "repeats an earlier id") }
            ids.append(id)
        }
        return ids
    }

    // MARK: Text

    /// A display name: trimmed, 1 to `maximumLength` characters (Unicode code points, as the database counts),
    /// without control characters.
    mutating func name(_ raw: String, field: String, maximumLength: Int) -> String {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if name.isEmpty {
            reject(field, "is required")
        } else if name.unicodeScalars.count > maximumLength {
            reject(field, "must be at most \(maximumLength) characters, got \(name.unicodeScalars.count)")
        } else if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            reject(field, "must not contain control characters")
        }
        return name
    }

    /// An optional unit; empty means none.
    mutating func unit(_ raw: String, field: String) -> String? {
        guard !raw.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return nil }
        return name(raw, field: field, maximumLength: HabitRules.maximumUnitLength)
    }

    // MARK: Numbers

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

    /// A page size: `defaultSize` when 0, at most `maximum`.
    mutating func pageSize(_ value: Int32, field: String = "page_size", defaultSize: Int, maximum: Int) -> Int {
        if value == 0 { return defaultSize }
        guard value > 0 else {
            reject(field, "must not be negative")
            return defaultSize
        }
        return min(Int(value), maximum)
    }

    // MARK: Calendar

    /// A real calendar date in years 1 to 9999.
    mutating func date(_ date: Habitflow_Habits_V1_LocalDate, field: String) -> LocalDate {
        guard (1...9999).contains(date.year),
            let local = LocalDate(year: Int(date.year), month: Int(date.month), day: Int(date.day))
        else {
            reject(field, "must be a calendar date (year 1-9999), got \(date.year)-\(date.month)-\(date.day)")
            return LocalDate(daysSinceEpoch: 0)
        }
        return local
    }

    /// A date the caller had to set.
    mutating func requiredDate(_ date: Habitflow_Habits_V1_LocalDate, isSet: Bool, field: String) -> LocalDate {
        guard isSet else {
            reject(field, "is required")
            return LocalDate(daysSinceEpoch: 0)
        }
        return self.date(date, field: field)
    }

    /// An existing ISO week.
    mutating func week(_ week: Habitflow_Habits_V1_IsoWeek, field: String) -> IsoWeek {
        guard let isoWeek = IsoWeek(year: Int(week.year), week: Int(week.week)) else {
            reject(field, "must be an ISO week (year 1-9999, week 1-52 or 53), got \(week.year)-W\(week.week)")
            return IsoWeek(containing: LocalDate(daysSinceEpoch: 0))
        }
        return isoWeek
    }

    /// A date range: `first` not after `last`, at most `maximumDays` long.
    mutating func range(_ first: LocalDate, _ last: LocalDate, field: String, maximumDays: Int? = nil) {
        if first > last {
            reject(field, "must not end (\(last)) before it starts (\(first))")
        } else if let maximumDays, first.days(until: last) + 1 > maximumDays {
            reject(field, "must span at most \(maximumDays) days")
        }
    }

    /// A page token this service issued for the same kind of list.
    mutating func pageToken(_ token: String, kind: String, fieldCount: Int, field: String = "page_token") -> [String]? {
        guard !token.isEmpty else { return nil }
        guard let fields = PageToken.decode(token, kind: kind), fields.count == fieldCount else {
            reject(field, "is not a token this list returned")
            return nil
        }
        return fields
    }
}

/// Opaque page tokens: a kind and a few fields, base64url-encoded. They carry no secrets, only a position.
enum PageToken {
    static func encode(kind: String, _ fields: [String]) -> String {
        Data(([kind] + fields).joined(separator: "|").utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ token: String, kind: String) -> [String]? {
        guard token.utf8.count <= 256 else { return nil }
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else { return nil }
        let parts = text.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
        guard parts.first == kind else { return nil }
        return Array(parts.dropFirst())
    }
}
