public import Foundation
public import HabitFlowCalendar

/// The numbers the seeds and DESIGN.md set for goals.
public enum GoalRules {
    public static let maximumActiveGoals = 10
    public static let maximumTitleLength = 100
    public static let maximumDescriptionLength = 500
    public static let maximumNoteLength = 500
    public static let maximumConversationIDLength = 200
    public static let maximumWeeklyTarget = 21
    public static let maximumCountTarget = 1_000_000.0
    public static let maximumQuantityTarget = 1_000_000_000.0
    public static let maximumUnitLength = 20
    public static let levelCount = 2...20
    public static let maximumLevelNameLength = 50
    public static let ratingScales: Set<Int> = [5, 10]
    /// A parent chain is at most this many goals deep (there are seven horizons).
    public static let maximumDepth = 7
    /// Links a goal has open at once (a user has at most 15 live habits, a partner as many).
    public static let maximumOpenLinks = 30
    /// A weekly goal whose horizon ended is completed when at least this share of its weeks was met.
    public static let completedWeeksPercent = 80
}

public enum GoalType: String, Sendable, Hashable, CaseIterable {
    case weeklyHabit = "weekly_habit"
    case recurringTask = "recurring_task"
    case count
    case quantity
    case level
    case rating

    /// Counted week by week (a week is met or not) rather than toward a total.
    public var isWeekly: Bool { self == .weeklyHabit || self == .recurringTask }
    /// Progress comes from dated assessments, not from linked habits.
    public var isAssessed: Bool { self == .level || self == .rating }
}

/// How long a goal runs; ordered from shortest to longest (`ongoing` is the longest).
public enum Horizon: String, Sendable, Hashable, CaseIterable, Comparable {
    case oneWeek = "1w"
    case fourWeeks = "4w"
    case eightWeeks = "8w"
    case twelveWeeks = "12w"
    case fiveYears = "5y"
    case tenYears = "10y"
    case ongoing

    private var rank: Int { Self.allCases.firstIndex(of: self)! }

    public static func < (lhs: Horizon, rhs: Horizon) -> Bool { lhs.rank < rhs.rank }

    /// The Sunday of the goal's last week, for a goal whose first week starts on `monday`; `nil` for ongoing goals.
    /// N weeks cover N ISO weeks including the first; years end with the ISO week holding the start plus the years.
    public func lastDay(startingOn monday: LocalDate) -> LocalDate? {
        switch self {
        case .oneWeek: monday.adding(days: 6)
        case .fourWeeks: monday.adding(days: 4 * 7 - 1)
        case .eightWeeks: monday.adding(days: 8 * 7 - 1)
        case .twelveWeeks: monday.adding(days: 12 * 7 - 1)
        case .fiveYears: IsoWeek(containing: monday.addingYears(5)).sunday
        case .tenYears: IsoWeek(containing: monday.addingYears(10)).sunday
        case .ongoing: nil
        }
    }
}

extension LocalDate {
    /// The same month and day `years` later; February 29 becomes February 28 in a common year.
    func addingYears(_ years: Int) -> LocalDate {
        LocalDate(year: year + years, month: month, day: day)
            ?? LocalDate(year: year + years, month: month, day: day - 1)!
    }
}

/// What the user set. Completed and expired by progress or horizon are derived (``GoalStatus``), never stored.
public enum GoalState: String, Sendable, Hashable {
    case active, paused, archived
    /// Completed by hand.
    case completed
}

/// What a goal is now, derived at read (DESIGN.md section 3a, "Status").
public enum GoalStatus: Sendable, Hashable, CaseIterable {
    case notStarted, inProgress, paused, completed, expired, archived

    /// Counts toward the limit of active goals: active or paused, not ended, not completed.
    public var holdsASlot: Bool { self == .notStarted || self == .inProgress || self == .paused }
}

/// The target value a goal had from one week on.
public struct TargetPeriod: Sendable, Hashable {
    /// A Monday.
    public var weekStart: LocalDate
    public var value: Double

    public init(weekStart: LocalDate, value: Double) {
        self.weekStart = weekStart
        self.value = value
    }
}

/// A goal as stored: its definition and the state the user set, without progress.
public struct GoalRecord: Sendable, Hashable {
    public var id: UUID
    public var ownerID: UUID
    public var title: String
    public var description: String
    public var icon: String
    public var categoryID: UUID?
    public var type: GoalType
    public var horizon: Horizon
    /// quantity goals.
    public var unit: String?
    /// level goals: lowest first.
    public var levels: [String]?
    /// rating goals: 5 or 10.
    public var ratingScale: Int?
    public var parentGoalID: UUID?
    /// The Monday of the first week.
    public var startDate: LocalDate
    /// The Sunday of the last week; `nil` for ongoing goals.
    public var endDate: LocalDate?
    public var targetDate: LocalDate?
    public var conversationID: String
    public var shared: Bool
    /// The partner a shared goal is shared with (`nil` unless `shared`); `ownerID` is its creator.
    public var partnerID: UUID?
    public var state: GoalState
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64
    public var createdSequence: Int64
    /// Oldest first; never empty (creation adds the first week's).
    public var targets: [TargetPeriod]

    public init(
        id: UUID, ownerID: UUID, title: String, description: String, icon: String, categoryID: UUID?, type: GoalType,
        horizon: Horizon, unit: String?, levels: [String]?, ratingScale: Int?, parentGoalID: UUID?,
        startDate: LocalDate, endDate: LocalDate?, targetDate: LocalDate?, conversationID: String, shared: Bool,
        state: GoalState, createdAt: Date, updatedAt: Date, deletedAt: Date?, changeSequence: Int64,
        createdSequence: Int64, targets: [TargetPeriod], partnerID: UUID? = nil
    ) {
        self.partnerID = partnerID
        self.id = id
        self.ownerID = ownerID
        self.title = title
        self.description = description
        self.icon = icon
        self.categoryID = categoryID
        self.type = type
        self.horizon = horizon
        self.unit = unit
        self.levels = levels
        self.ratingScale = ratingScale
        self.parentGoalID = parentGoalID
        self.startDate = startDate
        self.endDate = endDate
        self.targetDate = targetDate
        self.conversationID = conversationID
        self.shared = shared
        self.state = state
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
        self.changeSequence = changeSequence
        self.createdSequence = createdSequence
        self.targets = targets
    }

    public var isDeleted: Bool { deletedAt != nil }

    /// The target in force in `week`: the latest period starting on or before its Monday (the first one before it).
    public func target(in week: IsoWeek) -> Double {
        targets.last { $0.weekStart <= week.monday }?.value ?? targets.first?.value ?? 0
    }

    public var currentTarget: Double { targets.last?.value ?? 0 }

    /// The horizon has ended by `today`.
    public func hasEnded(by today: LocalDate) -> Bool { endDate.map { today > $0 } ?? false }
}

/// A habit linked to a goal for the weeks from `linkedFrom` through `linkedUntil`.
public struct GoalLinkRecord: Sendable, Hashable {
    public var goalID: UUID
    public var habitID: UUID
    /// The habit's owner.
    public var habitUserID: UUID
    /// A Monday.
    public var linkedFrom: LocalDate
    /// A Sunday; `nil` while linked.
    public var linkedUntil: LocalDate?
    public var habitDeleted: Bool

    public init(
        goalID: UUID, habitID: UUID, habitUserID: UUID, linkedFrom: LocalDate, linkedUntil: LocalDate?,
        habitDeleted: Bool
    ) {
        self.goalID = goalID
        self.habitID = habitID
        self.habitUserID = habitUserID
        self.linkedFrom = linkedFrom
        self.linkedUntil = linkedUntil
        self.habitDeleted = habitDeleted
    }

    public var isOpen: Bool { linkedUntil == nil }

    /// The link counts the entries of `week`.
    public func covers(_ week: IsoWeek) -> Bool {
        linkedFrom <= week.monday && (linkedUntil.map { week.sunday <= $0 } ?? true)
    }
}

/// A dated assessment of a level or rating goal.
public struct AssessmentRecord: Sendable, Hashable {
    public var id: UUID
    public var goalID: UUID
    public var date: LocalDate
    /// A level's position (1 = the first) or a rating.
    public var value: Int
    public var note: String
    public var createdAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64

    public init(
        id: UUID, goalID: UUID, date: LocalDate, value: Int, note: String, createdAt: Date, deletedAt: Date?,
        changeSequence: Int64
    ) {
        self.id = id
        self.goalID = goalID
        self.date = date
        self.value = value
        self.note = note
        self.createdAt = createdAt
        self.deletedAt = deletedAt
        self.changeSequence = changeSequence
    }
}

/// What goals knows of a habit (the habits service owns it).
public struct HabitInfo: Sendable, Hashable {
    public var id: UUID
    public var name: String
    public var unit: String?
    public var categoryID: UUID?
    public var deleted: Bool

    public init(id: UUID, name: String, unit: String?, categoryID: UUID?, deleted: Bool) {
        self.id = id
        self.name = name
        self.unit = unit
        self.categoryID = categoryID
        self.deleted = deleted
    }
}

/// A live category of the user's (the habits service owns them), in the user's display order.
public struct CategoryInfo: Sendable, Hashable {
    public var id: UUID
    public var name: String
    public var position: Int

    public init(id: UUID, name: String, position: Int) {
        self.id = id
        self.name = name
        self.position = position
    }
}
