public import Foundation
public import HabitFlowCalendar
public import HabitFlowRPC
internal import HabitFlowCrypto

/// Checks a request's fields and collects every violation, so one `INVALID_ARGUMENT` with a `BadRequest` names
/// them all (DESIGN.md section 4).
///
/// Each check returns the parsed value, or a placeholder when the field is invalid; call ``check()`` before using
/// what the checks returned. A service adds its own rules in an extension (habits' weekly target, auth's email).
///
/// ```swift
/// var validator = RequestValidator()
/// let id = validator.id(request.habitID, field: "habit_id")
/// let name = validator.name(request.name, field: "name", maximumLength: 100)
/// try validator.check()
/// ```
public struct RequestValidator: Sendable {
    public private(set) var violations: [FieldViolation] = []

    public init() {}

    public mutating func reject(_ field: String, _ description: String) {
        violations.append(FieldViolation(field: field, description: description))
    }

    /// Throws `INVALID_ARGUMENT` when any check failed.
    public func check() throws(RPCError) {
        if !violations.isEmpty { throw RPCError.invalidArgument(violations) }
    }

    // MARK: Ids

    /// A required UUID.
    public mutating func id(_ text: String, field: String) -> UUID {
        guard !text.isEmpty else {
            reject(field, "is required")
            return UUID.min
        }
        return optionalID(text, field: field) ?? UUID.min
    }

    /// A UUID or nothing (empty).
    public mutating func optionalID(_ text: String, field: String) -> UUID? {
        guard !text.isEmpty else { return nil }
        guard let id = UUID(canonical: text) else {
            reject(field, "must be a UUID, for example 3f2b8c1e-6d4a-4e1f-9c7b-2a5d8e9f0b1c")
            return nil
        }
        return id
    }

    /// An optional client-generated id for an idempotent create (not the nil UUID).
    public mutating func clientID(_ text: String, field: String) -> UUID? {
        let id = optionalID(text, field: field)
        if id == UUID.min {
            reject(field, "must not be the nil UUID")
            return nil
        }
        return id
    }

    /// 1 to `maximum` UUIDs, no repeats.
    public mutating func ids(_ texts: [String], field: String, maximum: Int) -> [UUID] {
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
    public mutating func name(_ raw: String, field: String, maximumLength: Int) -> String {
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

    /// An optional name; empty (or only white space) means none.
    public mutating func optionalName(_ raw: String, field: String, maximumLength: Int) -> String? {
        guard !raw.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return nil }
        return name(raw, field: field, maximumLength: maximumLength)
    }

    // MARK: Calendar

    /// A real calendar date in years 1 to 9999.
    public mutating func date(year: Int32, month: Int32, day: Int32, field: String) -> LocalDate {
        guard (1...9999).contains(year), let local = LocalDate(year: Int(year), month: Int(month), day: Int(day)) else {
            reject(field, "must be a calendar date (year 1-9999), got \(year)-\(month)-\(day)")
            return LocalDate(daysSinceEpoch: 0)
        }
        return local
    }

    /// An existing ISO week.
    public mutating func week(year: Int32, week: Int32, field: String) -> IsoWeek {
        guard let isoWeek = IsoWeek(year: Int(year), week: Int(week)) else {
            reject(field, "must be an ISO week (year 1-9999, week 1-52 or 53), got \(year)-W\(week)")
            return IsoWeek(containing: LocalDate(daysSinceEpoch: 0))
        }
        return isoWeek
    }

    /// A date range: `first` not after `last`, at most `maximumDays` long.
    public mutating func range(_ first: LocalDate, _ last: LocalDate, field: String, maximumDays: Int? = nil) {
        if first > last {
            reject(field, "must not end (\(last)) before it starts (\(first))")
        } else if let maximumDays, first.days(until: last) + 1 > maximumDays {
            reject(field, "must span at most \(maximumDays) days")
        }
    }

    // MARK: Pages

    /// The page size a list call serves: the rule's default for 0, at most its maximum; negative is refused.
    public mutating func pageSize(_ value: Int32, rule: PageSizeRule, field: String = "page_size") -> Int {
        if value == 0 { return rule.defaultSize }
        guard value > 0 else {
            reject(field, "must not be negative")
            return rule.defaultSize
        }
        return min(Int(value), rule.maximum)
    }

    /// The fields of a page token this service issued for the list named `list`; `nil` for the first page (no
    /// token) and when the token is refused.
    public mutating func pageToken(
        _ token: String, list: String, fieldCount: Int, field: String = "page_token"
    ) -> [String]? {
        guard !token.isEmpty else { return nil }
        guard let fields = PageToken.decode(token, list: list), fields.count == fieldCount else {
            reject(field, "is not a token this list returned")
            return nil
        }
        return fields
    }
}
