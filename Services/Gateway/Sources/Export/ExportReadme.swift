internal import Foundation

/// README.txt of the data export: how the files are written, then every file and column, from the same
/// ``ExportTable`` definitions that write the CSVs.
enum ExportReadme {
    /// Every CSV file, in archive order.
    static let tables: [ExportTableReadme] = [
        ExportTables.profile.readme, ExportTables.sessions.readme, ExportTables.linkedAccounts.readme,
        ExportTables.categories.readme,
        ExportTables.habits.readme, ExportTables.habitTargets.readme, ExportTables.entries.readme,
        ExportTables.goals.readme, ExportTables.goalLinks.readme, ExportTables.goalTargets.readme,
        ExportTables.assessments.readme, ExportTables.tasks.readme, ExportTables.reviews.readme,
        ExportTables.reviewRatings.readme, ExportTables.friends.readme, ExportTables.friendRequests.readme,
        ExportTables.blockedUsers.readme, ExportTables.partner.readme, ExportTables.sharingSettings.readme,
    ]

    static func text(exportTime: Date, userID: String) -> String {
        var text = """
            HabitFlow data export
            =====================

            Everything HabitFlow holds of your account \(userID), exported at \
            \(ExportFormat.time(.init(date: exportTime), isSet: true)).

            Every .csv file is RFC 4180 CSV in UTF-8: a header line, then one line per row, fields separated by
            commas, lines ended by CR LF, a field that holds a comma, a double quote or a line break enclosed in
            double quotes (a double quote inside is doubled). Values are written as they are stored, so a name that
            starts with = or + reaches a spreadsheet unchanged: open the files as text if that matters to you.

            Dates are ISO 8601 (2026-01-15), in your time zone; times are ISO 8601 in UTC (2026-01-15T08:30:00Z);
            weeks are ISO weeks (2026-W03, Monday to Sunday); booleans are true or false; an empty field is a value
            that is not set. Ids are UUIDs and join the files (habit_id in entries.csv is a habit_id in habits.csv).


            """
        for table in tables {
            text += "\(table.fileName)\n\(String(repeating: "-", count: table.fileName.count))\n\(table.about)\n\n"
            let width = table.columns.map(\.name.count).max() ?? 0
            for column in table.columns {
                text += "  \(column.name)\(String(repeating: " ", count: width - column.name.count))  \(column.about)\n"
            }
            text += "\n"
        }
        return text.replacingOccurrences(of: "\n", with: "\r\n")
    }
}
