public import Foundation
public import HabitFlowCalendar

/// A category as stored (live, or a tombstone when `deletedAt` is set).
public struct CategoryRecord: Sendable, Hashable {
    public var id: UUID
    public var name: String
    public var position: Int
    public var isDefault: Bool
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
    /// The user's change sequence value of the last write to it.
    public var changeSequence: Int64
}

/// From one ISO week on, a habit's weekly target is `target` (until the next period starts).
public struct TargetPeriod: Sendable, Hashable {
    /// A Monday.
    public var weekStart: LocalDate
    public var target: Int
}

/// A habit as stored, with its dated targets.
public struct HabitRecord: Sendable, Hashable {
    public var id: UUID
    public var name: String
    /// `nil`: Uncategorized.
    public var categoryID: UUID?
    public var unit: String?
    public var liveFrom: LocalDate
    public var deletedOn: LocalDate?
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64
    /// The change sequence value of its creation: habits list in this order.
    public var createdSequence: Int64
    /// Oldest first; never empty for a stored habit.
    public var targets: [TargetPeriod]

    public var isDeleted: Bool { deletedAt != nil }

    /// The target as of the latest period (the one the current week uses).
    public var currentTarget: Int { targets.last?.target ?? HabitRules.defaultWeeklyTarget }

    /// Whether the habit counts in `week`'s score: from the week it was created in, up to the week before the one
    /// it was deleted in (a habit deleted mid-week leaves that week; earlier weeks keep it).
    public func isLive(in week: IsoWeek) -> Bool {
        liveFrom <= week.sunday && (deletedOn.map { $0 > week.sunday } ?? true)
    }

    /// The target `week` had: the latest period starting on or before its Monday.
    public func target(in week: IsoWeek) -> Int {
        targets.last { $0.weekStart <= week.monday }?.target ?? targets.first?.target ?? HabitRules.defaultWeeklyTarget
    }
}

/// One completion of a habit on a user-local day.
public struct EntryRecord: Sendable, Hashable {
    public var id: UUID
    public var habitID: UUID
    public var date: LocalDate
    public var value: Decimal
    public var createdAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64
}

/// The limits and defaults of DESIGN.md section 3.
public enum HabitRules {
    public static let maximumCategories = 10
    public static let maximumLiveHabits = 15
    public static let maximumCategoryNameLength = 50
    public static let maximumHabitNameLength = 100
    public static let maximumUnitLength = 20
    public static let weeklyTargets = 1...21
    public static let defaultWeeklyTarget = 7
    public static let maximumEntryValue: Double = 1_000_000_000
    /// Created for every user, in this order.
    public static let defaultCategoryNames = ["Career", "Health", "Family", "Finances", "Wisdom"]
}
