internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowHabitsProtos

extension RequestValidator {
    /// At most this many bad entries of an import are described one by one (the rest are counted), so the status
    /// details stay far below any trailer size limit whatever the batch holds.
    static let maximumReportedImportViolations = 20

    /// The entries of an import: 1 to `maximum`, each with its own id (no repeats), a habit id, a calendar date not
    /// after `today` and a value in MarkHabitDone's range (1 when unset).
    mutating func importedEntries(
        _ entries: [Habitflow_Habits_V1_ImportedEntry], field: String, maximum: Int, today: LocalDate
    ) -> [EntryToImport] {
        guard (1...maximum).contains(entries.count) else {
            reject(field, "must hold 1 to \(maximum) entries, got \(entries.count)")
            return []
        }
        var parsed: [EntryToImport] = []
        parsed.reserveCapacity(entries.count)
        var firstIndexOfID: [UUID: Int] = [:]
        firstIndexOfID.reserveCapacity(entries.count)
        var badEntries = 0
        for (index, entry) in entries.enumerated() {
            let prefix = "\(field)[\(index)]"
            var checks = RequestValidator()
            let id: UUID
            if entry.entryID.isEmpty {
                checks.reject("\(prefix).entry_id", "is required (it makes a retried import idempotent)")
                id = UUID.min
            } else {
                id = checks.clientID(entry.entryID, field: "\(prefix).entry_id") ?? UUID.min
            }
            if id != UUID.min {
                if let earlier = firstIndexOfID[id] {
                    checks.reject("\(prefix).entry_id", "repeats \(field)[\(earlier)].entry_id")
                } else {
                    firstIndexOfID[id] = index
                }
            }
            let habitID = checks.id(entry.habitID, field: "\(prefix).habit_id")
            let date = checks.requiredDate(entry.date, isSet: entry.hasDate, field: "\(prefix).date")
            if checks.violations.allSatisfy({ $0.field != "\(prefix).date" }), date > today {
                checks.reject("\(prefix).date", "must not be after the user's today (\(today)), got \(date)")
            }
            let value = entry.hasValue ? checks.entryValue(entry.value, field: "\(prefix).value") : 1
            if checks.violations.isEmpty {
                parsed.append(EntryToImport(id: id, habitID: habitID, date: date, value: value))
                continue
            }
            badEntries += 1
            if badEntries <= Self.maximumReportedImportViolations {
                for violation in checks.violations { reject(violation.field, violation.description) }
            }
        }
        if badEntries > Self.maximumReportedImportViolations {
            reject(
                field,
                "\(badEntries) entries are invalid; the first \(Self.maximumReportedImportViolations) are described")
        }
        return parsed
    }
}
