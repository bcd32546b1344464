public import Foundation
public import HabitFlowCalendar

/// Entries of habits per ISO week, as the habits service aggregates them: what a goal's progress is derived from.
public struct EntryTotals: Sendable, Hashable {
    public struct Total: Sendable, Hashable {
        public var count: Int
        public var sum: Double

        public init(count: Int, sum: Double) {
            self.count = count
            self.sum = sum
        }
    }

    private struct Key: Hashable {
        var habitID: UUID
        var weekStart: Int
    }

    private var totals: [Key: Total] = [:]

    public init() {}

    /// Puts a habit's week at the total given (what an answer says the whole week holds; 0 for a week emptied).
    public mutating func replace(habitID: UUID, weekStart: LocalDate, count: Int, sum: Double) {
        totals[Key(habitID: habitID, weekStart: weekStart.daysSinceEpoch)] = Total(count: count, sum: sum)
    }

    /// Puts every week of `newer` in place of what these totals held for it (an emptied week goes).
    public mutating func update(with newer: EntryTotals) {
        for (key, total) in newer.totals {
            totals[key] = total.count == 0 && total.sum == 0 ? nil : total
        }
    }

    public func total(habitID: UUID, week: IsoWeek) -> Total? {
        totals[Key(habitID: habitID, weekStart: week.monday.daysSinceEpoch)]
    }
}

/// A goal's progress at one moment (DESIGN.md section 3a, "Progress per type").
public struct GoalProgress: Sendable, Hashable {
    /// The card's figure; never capped.
    public var value: Double
    public var target: Double
    /// value ÷ target × 100, rounded down, at most 100.
    public var percent: Int
    public var display: String
    /// Weekly goals: weeks met ÷ weeks so far; other goals: `percent`.
    public var overallPercent: Int
    public var thisWeekValue: Double
    public var thisWeekMet: Bool
    public var weeksMet: Int
    public var weeksElapsed: Int
    /// 0 for ongoing goals.
    public var weeksTotal: Int
    /// Level goals: the latest assessed level.
    public var currentLevel: String?
}

/// One week of a goal's history.
public struct GoalWeekFigures: Sendable, Hashable {
    public var week: IsoWeek
    public var value: Double
    public var target: Double
    public var cumulative: Double
    public var met: Bool
}

/// Everything derived of a goal: its progress now, its status, and each of its weeks so far.
public struct GoalEvaluation: Sendable, Hashable {
    public var progress: GoalProgress
    public var status: GoalStatus
    /// From the goal's first week through the current one (or its last, once ended), oldest first.
    public var weeks: [GoalWeekFigures]
}

extension GoalRecord {
    /// Derives progress, status and history from the links, assessments, entries and the days the goal's linked
    /// planning tasks were completed (deleted tasks included: they keep what they gave), as of `today` in the owner's
    /// zone. Each completed task counts in the ISO week of its day (``GoalType/taskCompletionValue``). Nothing here
    /// is stored or cached by the goal itself, so the same inputs always give the same answer.
    public func evaluate(
        links: [GoalLinkRecord], assessments: [AssessmentRecord], entries: EntryTotals, taskCompletions: [LocalDate],
        today: LocalDate
    ) -> GoalEvaluation {
        let firstWeek = IsoWeek(containing: startDate)
        let currentWeek = IsoWeek(containing: today)
        let lastWeek = endDate.map { IsoWeek(containing: $0) }
        let lastCountedWeek = max(firstWeek, min(currentWeek, lastWeek ?? currentWeek))
        let ended = hasEnded(by: today)
        let assessed = assessments.filter { $0.deletedAt == nil }
            .sorted { ($0.date, $0.createdAt) < ($1.date, $1.createdAt) }
        // Completed linked tasks per week (by the week's Monday).
        var tasksPerWeek: [Int: Int] = [:]
        if type.taskCompletionValue > 0 {
            for day in taskCompletions { tasksPerWeek[IsoWeek(containing: day).monday.daysSinceEpoch, default: 0] += 1 }
        }

        var weeks: [GoalWeekFigures] = []
        weeks.reserveCapacity(firstWeek.weeks(until: lastCountedWeek) + 1)
        var cumulative = 0.0
        var assessmentIndex = 0
        var latestAssessment: Int?
        var week = firstWeek
        while week <= lastCountedWeek {
            let target = target(in: week)
            let value: Double
            if type.isAssessed {
                while assessmentIndex < assessed.count, assessed[assessmentIndex].date <= week.sunday {
                    latestAssessment = assessed[assessmentIndex].value
                    assessmentIndex += 1
                }
                value = Double(latestAssessment ?? 0)
            } else {
                let tasks = Double(tasksPerWeek[week.monday.daysSinceEpoch] ?? 0) * type.taskCompletionValue
                value = links.reduce(tasks) { total, link in
                    guard link.covers(week), let entries = entries.total(habitID: link.habitID, week: week) else {
                        return total
                    }
                    return total + (type == .quantity ? entries.sum : Double(entries.count))
                }
            }
            cumulative += value
            let met: Bool =
                switch type {
                case .weeklyHabit: value >= target
                case .recurringTask: value > 0
                case .count, .quantity: cumulative >= target
                case .level, .rating: value > 0 && value >= target
                }
            weeks.append(
                GoalWeekFigures(
                    week: week, value: value, target: target,
                    cumulative: type == .count || type == .quantity ? cumulative : value, met: met))
            week = week.adding(weeks: 1)
        }

        let latest = assessed.last
        let lastFigures = weeks[weeks.count - 1]
        let weeksMet = weeks.count { $0.met }
        let weeksTotal = lastWeek.map { firstWeek.weeks(until: $0) + 1 } ?? 0
        let progress: GoalProgress
        switch type {
        case .weeklyHabit, .recurringTask:
            // Weeks so far: the finished ones, and the current one once met (an unfinished week is not a miss yet).
            let finished = weeks.filter { $0.week < currentWeek }
            let currentMet = weeks.last.map { $0.week == currentWeek && $0.met } ?? false
            let soFar = finished.count + (currentMet ? 1 : 0)
            let overall = soFar == 0 ? 0 : (finished.count { $0.met } + (currentMet ? 1 : 0)) * 100 / soFar
            let isRecurring = type == .recurringTask
            let value = isRecurring ? (lastFigures.met ? 1 : 0) : lastFigures.value
            let target = isRecurring ? 1 : lastFigures.target
            progress = GoalProgress(
                value: value, target: target, percent: Self.percent(value, of: target),
                display: isRecurring
                    ? (lastFigures.met ? "Done this week" : "Not done this week")
                    : "\(Self.figure(value))/\(Self.figure(target))",
                overallPercent: overall, thisWeekValue: lastFigures.value, thisWeekMet: lastFigures.met,
                weeksMet: weeksMet, weeksElapsed: weeks.count, weeksTotal: weeksTotal)
        case .count, .quantity:
            let target = lastFigures.target
            let percent = Self.percent(cumulative, of: target)
            let unit = unit.map { " \($0)" } ?? ""
            progress = GoalProgress(
                value: cumulative, target: target, percent: percent,
                display: "\(Self.figure(cumulative))/\(Self.figure(target))\(unit)", overallPercent: percent,
                thisWeekValue: lastFigures.value, thisWeekMet: cumulative >= target, weeksMet: weeksMet,
                weeksElapsed: weeks.count, weeksTotal: weeksTotal)
        case .level, .rating:
            let value = Double(latest?.value ?? 0)
            let target = lastFigures.target
            let percent = Self.percent(value, of: target)
            var currentLevel: String?
            let display: String
            if type == .level {
                let levels = levels ?? []
                currentLevel = latest.flatMap { levels.indices.contains($0.value - 1) ? levels[$0.value - 1] : nil }
                display = "\(currentLevel ?? "Not assessed yet") (\(Self.figure(value))/\(Self.figure(target)))"
            } else {
                display = latest == nil ? "Not rated yet" : "\(Self.figure(value))/\(Self.figure(target))"
            }
            progress = GoalProgress(
                value: value, target: target, percent: percent, display: display, overallPercent: percent,
                thisWeekValue: lastFigures.value, thisWeekMet: value > 0 && value >= target, weeksMet: weeksMet,
                weeksElapsed: weeks.count, weeksTotal: weeksTotal, currentLevel: currentLevel)
        }
        return GoalEvaluation(progress: progress, status: status(progress: progress, ended: ended, weeks: weeks,
            weeksTotal: weeksTotal, anythingCounted: latest != nil || weeks.contains { $0.value > 0 }), weeks: weeks)
    }

    private func status(
        progress: GoalProgress, ended: Bool, weeks: [GoalWeekFigures], weeksTotal: Int, anythingCounted: Bool
    ) -> GoalStatus {
        if state == .archived { return .archived }
        if state == .completed { return .completed }
        if !type.isWeekly, progress.target > 0, progress.value >= progress.target { return .completed }
        if ended {
            guard type.isWeekly, weeksTotal > 0 else { return .expired }
            let met = weeks.count { $0.met }
            return met * 100 >= GoalRules.completedWeeksPercent * weeksTotal ? .completed : .expired
        }
        if state == .paused { return .paused }
        return anythingCounted ? .inProgress : .notStarted
    }

    static func percent(_ value: Double, of target: Double) -> Int {
        guard target > 0, value > 0 else { return 0 }
        // The epsilon keeps 0.29 of 1 at 29 % where binary floating point gives 28.999…
        return min(100, Int((value * 100 / target + 1e-9).rounded(.down)))
    }

    /// A figure as people write it: 3, 42.5, 0.25 (at most six decimals, no trailing zeros).
    static func figure(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        var text = String(format: "%.6f", value)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}
