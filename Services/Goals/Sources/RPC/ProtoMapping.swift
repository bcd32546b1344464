internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import SwiftProtobuf
internal import HabitFlowCrypto

// Records and derived figures → wire messages, and the enums both ways.

extension GoalType {
    var proto: Habitflow_Goals_V1_GoalType {
        switch self {
        case .weeklyHabit: .weeklyHabit
        case .recurringTask: .recurringTask
        case .count: .count
        case .quantity: .quantity
        case .level: .level
        case .rating: .rating
        }
    }

    init?(_ proto: Habitflow_Goals_V1_GoalType) {
        switch proto {
        case .weeklyHabit: self = .weeklyHabit
        case .recurringTask: self = .recurringTask
        case .count: self = .count
        case .quantity: self = .quantity
        case .level: self = .level
        case .rating: self = .rating
        case .unspecified, .UNRECOGNIZED: return nil
        }
    }
}

extension Horizon {
    var proto: Habitflow_Goals_V1_Horizon {
        switch self {
        case .oneWeek: .oneWeek
        case .fourWeeks: .fourWeeks
        case .eightWeeks: .eightWeeks
        case .twelveWeeks: .twelveWeeks
        case .fiveYears: .fiveYears
        case .tenYears: .tenYears
        case .ongoing: .ongoing
        }
    }

    init?(_ proto: Habitflow_Goals_V1_Horizon) {
        switch proto {
        case .oneWeek: self = .oneWeek
        case .fourWeeks: self = .fourWeeks
        case .eightWeeks: self = .eightWeeks
        case .twelveWeeks: self = .twelveWeeks
        case .fiveYears: self = .fiveYears
        case .tenYears: self = .tenYears
        case .ongoing: self = .ongoing
        case .unspecified, .UNRECOGNIZED: return nil
        }
    }
}

extension GoalState {
    var proto: Habitflow_Goals_V1_GoalState {
        switch self {
        case .active: .active
        case .paused: .paused
        case .archived: .archived
        case .completed: .completed
        }
    }
}

extension GoalStatus {
    var proto: Habitflow_Goals_V1_GoalStatus {
        switch self {
        case .notStarted: .notStarted
        case .inProgress: .inProgress
        case .paused: .paused
        case .completed: .completed
        case .expired: .expired
        case .archived: .archived
        }
    }

    init?(_ proto: Habitflow_Goals_V1_GoalStatus) {
        guard let status = Self.allCases.first(where: { $0.proto == proto }) else { return nil }
        self = status
    }
}

extension LocalDate {
    var proto: Habitflow_Goals_V1_LocalDate {
        .with {
            $0.year = Int32(year)
            $0.month = Int32(month)
            $0.day = Int32(day)
        }
    }
}

extension IsoWeek {
    var proto: Habitflow_Goals_V1_IsoWeek {
        .with {
            $0.year = Int32(year)
            $0.week = Int32(week)
        }
    }
}

extension Date {
    var timestamp: Google_Protobuf_Timestamp { Google_Protobuf_Timestamp(date: self) }
}

extension GoalRecord {
    /// The goal without progress (the change feed's form).
    func proto(links: [GoalLinkRecord], habits: [UUID: HabitInfo] = [:]) -> Habitflow_Goals_V1_Goal {
        .with {
            $0.id = id.lowercasedString
            $0.ownerID = ownerID.lowercasedString
            $0.title = title
            $0.description_p = description
            $0.icon = icon
            $0.categoryID = categoryID?.lowercasedString ?? ""
            $0.type = type.proto
            $0.target = .with {
                $0.value = currentTarget
                $0.unit = unit ?? ""
                $0.levels = levels ?? []
                $0.ratingScale = Int32(ratingScale ?? 0)
            }
            $0.horizon = horizon.proto
            $0.parentGoalID = parentGoalID?.lowercasedString ?? ""
            $0.startDate = startDate.proto
            if let endDate { $0.endDate = endDate.proto }
            if let targetDate { $0.targetDate = targetDate.proto }
            $0.conversationID = conversationID
            $0.shared = shared
            $0.partnerID = partnerID?.lowercasedString ?? ""
            $0.state = state.proto
            $0.links = links.map { $0.proto(habit: habits[$0.habitID]) }
            $0.targetHistory = targets.map { period in
                .with {
                    $0.fromWeek = IsoWeek(containing: period.weekStart).proto
                    $0.value = period.value
                }
            }
            $0.createTime = createdAt.timestamp
            $0.updateTime = updatedAt.timestamp
            if let deletedAt {
                $0.deleteTime = deletedAt.timestamp
                $0.deleted = true
            }
        }
    }

    /// The goal with its derived progress and status.
    func proto(
        links: [GoalLinkRecord], habits: [UUID: HabitInfo], progress: GoalProgress, status: GoalStatus
    ) -> Habitflow_Goals_V1_Goal {
        var goal = proto(links: links, habits: habits)
        goal.status = status.proto
        goal.progress = progress.proto
        return goal
    }
}

extension GoalProgress {
    var proto: Habitflow_Goals_V1_GoalProgress {
        .with {
            $0.value = value
            $0.target = target
            $0.percent = Int32(percent)
            $0.display = display
            $0.overallPercent = Int32(overallPercent)
            $0.thisWeekValue = thisWeekValue
            $0.thisWeekMet = thisWeekMet
            $0.weeksMet = Int32(weeksMet)
            $0.weeksElapsed = Int32(weeksElapsed)
            $0.weeksTotal = Int32(weeksTotal)
            $0.currentLevel = currentLevel ?? ""
        }
    }
}

extension GoalLinkRecord {
    func proto(habit: HabitInfo?) -> Habitflow_Goals_V1_GoalLink {
        .with {
            $0.habitID = habitID.lowercasedString
            $0.userID = habitUserID.lowercasedString
            $0.habitName = habit?.name ?? ""
            $0.unit = habit?.unit ?? ""
            $0.linkedFrom = linkedFrom.proto
            if let linkedUntil { $0.linkedUntil = linkedUntil.proto }
            $0.habitDeleted = habitDeleted || (habit?.deleted ?? false)
        }
    }
}

extension AssessmentRecord {
    var proto: Habitflow_Goals_V1_Assessment {
        .with {
            $0.id = id.lowercasedString
            $0.goalID = goalID.lowercasedString
            $0.date = date.proto
            $0.value = Int32(value)
            $0.note = note
            $0.createTime = createdAt.timestamp
            if let deletedAt {
                $0.deleteTime = deletedAt.timestamp
                $0.deleted = true
            }
        }
    }
}

extension TaskRecord {
    var proto: Habitflow_Goals_V1_Task {
        .with {
            $0.id = id.lowercasedString
            $0.title = title
            $0.week = week.proto
            $0.goalID = goalID?.lowercasedString ?? ""
            $0.completed = completedOn != nil
            if let completedOn { $0.completedOn = completedOn.proto }
            $0.createTime = createdAt.timestamp
            $0.updateTime = updatedAt.timestamp
            if let deletedAt {
                $0.deleteTime = deletedAt.timestamp
                $0.deleted = true
            }
        }
    }
}

extension GoalWeekFigures {
    var proto: Habitflow_Goals_V1_GoalWeek {
        .with {
            $0.week = week.proto
            $0.weekStart = week.monday.proto
            $0.value = value
            $0.target = target
            $0.cumulative = cumulative
            $0.met = met
        }
    }
}

extension GoalsSnapshot {
    /// A goal of the snapshot on the wire, with its progress.
    func proto(of goal: GoalRecord) -> Habitflow_Goals_V1_Goal {
        guard let derived = progress[goal.id] else { return goal.proto(links: links(of: goal.id), habits: habits) }
        return goal.proto(links: links(of: goal.id), habits: habits, progress: derived.progress, status: derived.status)
    }
}

extension ReviewType {
    var proto: Habitflow_Goals_V1_ReviewType {
        switch self {
        case .twelveWeek: .twelveWeek
        case .annual: .annual
        }
    }

    init?(_ proto: Habitflow_Goals_V1_ReviewType) {
        guard let type = Self.allCases.first(where: { $0.proto == proto }) else { return nil }
        self = type
    }
}

extension ReviewRecord {
    var proto: Habitflow_Goals_V1_Review {
        .with {
            $0.id = id.lowercasedString
            $0.type = type.proto
            $0.date = date.proto
            $0.ratings = ratings.map { rating in
                .with {
                    $0.categoryID = rating.categoryID.lowercasedString
                    $0.rating = Int32(rating.rating)
                }
            }
            $0.nextReviewDate = nextReviewDate.proto
            $0.note = note
            $0.createTime = createdAt.timestamp
            $0.updateTime = updatedAt.timestamp
            if let deletedAt {
                $0.deleteTime = deletedAt.timestamp
                $0.deleted = true
            }
        }
    }
}

extension CategoryRatings {
    var proto: Habitflow_Goals_V1_GetCategoryRatingsResponse {
        .with {
            $0.latest = latestProto
            $0.history = history.map { history in
                .with {
                    $0.categoryID = history.categoryID.lowercasedString
                    $0.categoryName = history.category?.name ?? ""
                    $0.categoryDeleted = history.category == nil
                    $0.points = history.points.map { point in
                        .with {
                            $0.date = point.date.proto
                            $0.rating = Int32(point.rating)
                            $0.reviewID = point.reviewID.lowercasedString
                        }
                    }
                }
            }
        }
    }

    /// Only the latest rating of each live category (what an overview shows, without the history).
    var latestProto: [Habitflow_Goals_V1_LatestCategoryRating] {
        latest.map { latest in
            .with {
                $0.categoryID = latest.category.id.lowercasedString
                $0.categoryName = latest.category.name
                $0.rating = Int32(latest.point.rating)
                $0.reviewID = latest.point.reviewID.lowercasedString
                $0.date = latest.point.date.proto
            }
        }
    }
}
