internal import Foundation
internal import HabitFlowArchive
internal import HabitFlowCalendar
internal import SwiftProtobuf

/// One CSV file of the data export: its name, what a row is, and its columns, each with the sentence README.txt
/// gives it. The columns are the single source of both the CSV header and the README, so the two cannot drift.
struct ExportTable<Record>: Sendable {
    struct Column: Sendable {
        let name: String
        let about: String
        let value: @Sendable (Record, ExportNames) -> String
    }

    let fileName: String
    /// What one row is, for the README.
    let about: String
    let columns: [Column]

    init(_ fileName: String, about: String, _ columns: [Column]) {
        self.fileName = fileName
        self.about = about
        self.columns = columns
    }

    var header: [String] { columns.map(\.name) }

    func row(_ record: Record, names: ExportNames) -> [String] {
        columns.map { $0.value(record, names) }
    }

    var readme: ExportTableReadme {
        ExportTableReadme(fileName: fileName, about: about, columns: columns.map { ($0.name, $0.about) })
    }
}

/// What README.txt says of one file.
struct ExportTableReadme: Sendable {
    let fileName: String
    let about: String
    let columns: [(name: String, about: String)]
}

/// Names the CSVs repeat next to ids (a habit's category, an entry's habit, a link's goal), so each file reads on
/// its own in a spreadsheet.
struct ExportNames: Sendable {
    var categories: [String: String] = [:]
    var habits: [String: String] = [:]
    var goals: [String: String] = [:]

    func category(_ id: String) -> String { id.isEmpty ? "Uncategorized" : categories[id] ?? "" }
    func habit(_ id: String) -> String { habits[id] ?? "" }
    func goal(_ id: String) -> String { goals[id] ?? "" }
}

/// How values are written in the export's CSVs (README.txt states the same), on top of ``CSVField``'s formats:
/// dates ISO 8601, times UTC ISO 8601, ISO weeks `2026-W03`, booleans `true`/`false`, whole numbers without a
/// fraction, enums as their proto names without the type prefix, lists joined by `;`, and an empty field for a value
/// that is not set.
enum ExportFormat {
    static func date(year: Int32, month: Int32, day: Int32) -> String {
        CSVField.date(LocalDate(year: Int(year), month: Int(month), day: Int(day))).text
    }

    static func week(year: Int32, week: Int32) -> String {
        IsoWeek(year: Int(year), week: Int(week))?.description ?? ""
    }

    static func time(_ timestamp: Google_Protobuf_Timestamp, isSet: Bool) -> String {
        CSVField.timestamp(isSet ? timestamp.date : nil).text
    }

    static func bool(_ value: Bool) -> String { CSVField.bool(value).text }

    /// Whole numbers without a fraction (`3`, not `3.0`); others as Swift's shortest round-trip form (`2.5`).
    static func number(_ value: Double) -> String {
        if value.rounded() == value, abs(value) < 1e15 { return CSVField.integer(Int64(value)).text }
        return CSVField.double(value).text
    }

    /// A proto enum value as its proto name without the type prefix, in lower case: `GOAL_TYPE_WEEKLY_HABIT` →
    /// `weekly_habit`; `unspecified` for 0, and the number of a value this gateway does not know.
    static func enumName(_ value: some SwiftProtobuf.Enum) -> String {
        let swiftName = String(describing: value)
        guard !swiftName.hasPrefix("UNRECOGNIZED") else { return String(value.rawValue) }
        var snake = ""
        for character in swiftName {
            if character.isUppercase {
                snake += "_" + character.lowercased()
            } else {
                snake.append(character)
            }
        }
        return snake
    }

    static func list(_ values: [String]) -> String { values.joined(separator: ";") }

    /// The UTC day of `date`, `2026-11-27` (for the archive's name).
    static func utcDate(_ date: Date) -> String {
        String(CSVField.timestamp(date).text.prefix { $0 != "T" })
    }
}

// MARK: The columns most records share

/// A record with a creation time (the services' messages name it alike).
protocol CreatedRecord: Sendable {
    var createTime: Google_Protobuf_Timestamp { get }
    var hasCreateTime: Bool { get }
}

/// A record with a last-change time.
protocol UpdatedRecord: Sendable {
    var updateTime: Google_Protobuf_Timestamp { get }
    var hasUpdateTime: Bool { get }
}

/// A record that is kept, marked, when deleted (a tombstone).
protocol DeletableRecord: Sendable {
    var deleted: Bool { get }
    var deleteTime: Google_Protobuf_Timestamp { get }
    var hasDeleteTime: Bool { get }
}

extension ExportTable.Column where Record: CreatedRecord {
    static func createTime(_ about: String = "When it was created.") -> Self {
        .init(name: "create_time", about: about) { record, _ in
            ExportFormat.time(record.createTime, isSet: record.hasCreateTime)
        }
    }
}

extension ExportTable.Column where Record: UpdatedRecord {
    static func updateTime(_ about: String = "When it last changed.") -> Self {
        .init(name: "update_time", about: about) { record, _ in
            ExportFormat.time(record.updateTime, isSet: record.hasUpdateTime)
        }
    }
}

extension ExportTable.Column where Record: DeletableRecord {
    static func deleted(_ about: String = "Whether it was deleted.") -> Self {
        .init(name: "deleted", about: about) { record, _ in ExportFormat.bool(record.deleted) }
    }

    static func deleteTime(_ about: String = "When it was deleted; empty if not.") -> Self {
        .init(name: "delete_time", about: about) { record, _ in
            ExportFormat.time(record.deleteTime, isSet: record.hasDeleteTime)
        }
    }
}
