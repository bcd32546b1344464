internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowHabitsProtos
internal import SwiftProtobuf
internal import HabitFlowCrypto

// Stored records and domain values as API messages.

extension LocalDate {
    var proto: Habitflow_Habits_V1_LocalDate {
        .with {
            $0.year = Int32(year)
            $0.month = Int32(month)
            $0.day = Int32(day)
        }
    }
}

extension IsoWeek {
    var proto: Habitflow_Habits_V1_IsoWeek {
        .with {
            $0.year = Int32(year)
            $0.week = Int32(week)
        }
    }
}

extension Decimal {
    var doubleValue: Double { NSDecimalNumber(decimal: self).doubleValue }
}

extension CategoryRecord {
    var proto: Habitflow_Habits_V1_Category {
        .with {
            $0.id = id.lowercasedString
            $0.name = name
            $0.position = Int32(position)
            $0.isDefault = isDefault
            $0.createTime = Google_Protobuf_Timestamp(date: createdAt)
            $0.updateTime = Google_Protobuf_Timestamp(date: updatedAt)
            if let deletedAt {
                $0.deleteTime = Google_Protobuf_Timestamp(date: deletedAt)
                $0.deleted = true
            }
        }
    }
}

extension HabitRecord {
    var proto: Habitflow_Habits_V1_Habit {
        .with {
            $0.id = id.lowercasedString
            $0.name = name
            $0.categoryID = categoryID?.lowercasedString ?? ""
            $0.weeklyTarget = Int32(currentTarget)
            $0.unit = unit ?? ""
            $0.createTime = Google_Protobuf_Timestamp(date: createdAt)
            $0.updateTime = Google_Protobuf_Timestamp(date: updatedAt)
            $0.liveFrom = liveFrom.proto
            if let deletedAt {
                $0.deleteTime = Google_Protobuf_Timestamp(date: deletedAt)
                $0.deleted = true
            }
            if let deletedOn { $0.deletedOn = deletedOn.proto }
            $0.targetHistory = targets.map { period in
                .with {
                    $0.fromWeek = IsoWeek(containing: period.weekStart).proto
                    $0.weeklyTarget = Int32(period.target)
                }
            }
        }
    }
}

extension HabitRecord {
    /// What other services need of a habit: its name, unit and category (`HabitsInternal`).
    var summary: Habitflow_Habits_V1_HabitSummary {
        .with {
            $0.habitID = id.lowercasedString
            $0.name = name
            $0.unit = unit ?? ""
            $0.categoryID = categoryID?.lowercasedString ?? ""
            $0.deleted = isDeleted
        }
    }
}

extension CategoryRecord {
    var summary: Habitflow_Habits_V1_CategorySummary {
        .with {
            $0.categoryID = id.lowercasedString
            $0.name = name
            $0.position = Int32(position)
        }
    }
}

extension EntryRecord {
    var proto: Habitflow_Habits_V1_Entry {
        .with {
            $0.id = id.lowercasedString
            $0.habitID = habitID.lowercasedString
            $0.date = date.proto
            $0.value = value.doubleValue
            $0.createTime = Google_Protobuf_Timestamp(date: createdAt)
            if let deletedAt {
                $0.deleteTime = Google_Protobuf_Timestamp(date: deletedAt)
                $0.deleted = true
            }
        }
    }
}

extension WeeklyScore {
    var proto: Habitflow_Habits_V1_WeeklyScore {
        .with {
            $0.metHabits = Int32(met)
            $0.totalHabits = Int32(total)
            $0.percent = Int32(percent)
            $0.display = display
        }
    }
}

extension CategoryWeekScore {
    var proto: Habitflow_Habits_V1_CategoryScore {
        .with {
            $0.categoryID = categoryID?.lowercasedString ?? ""
            $0.categoryName = name
            $0.score = score.proto
        }
    }
}

extension ChangedResource {
    var proto: Habitflow_Habits_V1_Change {
        .with {
            switch self {
            case .category(let category):
                $0.category = category.proto
                $0.deleted = category.deletedAt != nil
            case .habit(let habit):
                $0.habit = habit.proto
                $0.deleted = habit.isDeleted
            case .entry(let entry):
                $0.entry = entry.proto
                $0.deleted = entry.deletedAt != nil
            }
        }
    }
}
