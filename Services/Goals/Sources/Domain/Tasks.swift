public import Foundation
public import HabitFlowCalendar

/// The numbers for planning tasks.
public enum TaskRules {
    public static let maximumTitleLength = 200
}

/// A planning task as stored (seed 000): a title for one ISO week, optionally linked to a goal, completed or not.
///
/// A completed task linked to a goal counts for it in the ISO week of `completedOn`, deleted or not (a deleted task
/// keeps what it gave); ``GoalRecord/evaluate(links:assessments:entries:taskCompletions:today:)`` derives that.
public struct TaskRecord: Sendable, Hashable {
    public var id: UUID
    public var title: String
    public var week: IsoWeek
    public var goalID: UUID?
    /// The user-local day it was completed; `nil` while open.
    public var completedOn: LocalDate?
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64
    public var createdSequence: Int64

    public init(
        id: UUID, title: String, week: IsoWeek, goalID: UUID?, completedOn: LocalDate?, createdAt: Date,
        updatedAt: Date, deletedAt: Date?, changeSequence: Int64, createdSequence: Int64
    ) {
        self.id = id
        self.title = title
        self.week = week
        self.goalID = goalID
        self.completedOn = completedOn
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
        self.changeSequence = changeSequence
        self.createdSequence = createdSequence
    }

    public var isDeleted: Bool { deletedAt != nil }
}

extension GoalType {
    /// Planning tasks may link to goals of this type (level and rating goals count assessments only).
    public var linksTasks: Bool { !isAssessed }

    /// What one completed linked task gives a week of a goal of this type: one check-in for weekly_habit, count and
    /// recurring_task goals; nothing for quantity goals (they count units) and assessed goals.
    public var taskCompletionValue: Double {
        switch self {
        case .weeklyHabit, .recurringTask, .count: 1
        case .quantity, .level, .rating: 0
        }
    }
}

/// The fields an update of a task sets; `nil` leaves a field as it is, `.some(nil)` unlinks.
public struct TaskChanges: Sendable, Hashable {
    public var title: String?
    public var week: IsoWeek?
    public var goalID: UUID??

    public init() {}
}
