public import Foundation
public import HabitFlowCalendar

extension GoalRecord {
    /// The goal's weeks include `week`: it started by the week's Sunday and had not ended before its Monday.
    public func includes(_ week: IsoWeek) -> Bool {
        startDate <= week.sunday && (endDate.map { $0 >= week.monday } ?? true)
    }
}

/// One "Based on your goals" suggestion for a week (seed 000 US7; DESIGN.md section 3a, "Suggestions and prompts").
public struct GoalSuggestion: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// A habit linked to a weekly goal with fewer check-ins that week than the goal's weekly target.
        case habit(id: UUID, name: String, checkIns: Int, target: Int)
        /// A recurring goal not done that week: schedule it.
        case recurring
    }

    public var kind: Kind
    public var goalID: UUID
    public var goalTitle: String
    /// Check-ins still needed that week (habit), or 1 (recurring).
    public var shortfall: Int
    /// Ready to show.
    public var text: String
}

/// Derives the suggestions of a week from what a goals snapshot holds; pure, so the same inputs give the same list.
public enum GoalSuggestions {
    /// For each active (not started or in progress) `weekly_habit` goal whose weeks include `week`: each habit of
    /// `userID`'s linked to it (an open link that covers the week, the habit not deleted) with fewer check-ins that
    /// week than the goal's target in that week; and for each active `recurring_task` goal whose weeks include `week`
    /// and that is not done that week (no linked habit's entry, no linked task completed), one recurring suggestion.
    /// Most behind first: the largest shortfall, then the goals' order in `goals` (the list order), then the habit's
    /// name.
    ///
    /// - Parameters:
    ///   - goals: the user's live goals in list order.
    ///   - statuses: each goal's derived status now; a goal without one is left out.
    ///   - taskCompletions: per goal, the days its linked tasks were completed.
    ///   - habits: what habits knows of the linked habits (their names); a habit it does not know is left out.
    ///   - currentWeek: the user's current week (the text says "this week" for it).
    public static func suggestions(
        for week: IsoWeek, currentWeek: IsoWeek, user userID: UUID, goals: [GoalRecord],
        statuses: [UUID: GoalStatus], links: [UUID: [GoalLinkRecord]], taskCompletions: [UUID: [LocalDate]],
        entries: EntryTotals, habits: [UUID: HabitInfo]
    ) -> [GoalSuggestion] {
        let when = week == currentWeek ? "this week" : "in \(week)"
        var ranked: [(suggestion: GoalSuggestion, goalIndex: Int, habitName: String)] = []
        for (goalIndex, goal) in goals.enumerated() {
            guard let status = statuses[goal.id], status == .notStarted || status == .inProgress,
                goal.state == .active, goal.includes(week)
            else { continue }
            let goalLinks = links[goal.id] ?? []
            switch goal.type {
            case .weeklyHabit:
                let target = Int(goal.target(in: week).rounded(.up))
                var seen: Set<UUID> = []
                for link in goalLinks
                where link.isOpen && !link.habitDeleted && link.habitUserID == userID && link.covers(week)
                    && seen.insert(link.habitID).inserted
                {
                    guard let habit = habits[link.habitID], !habit.deleted else { continue }
                    let checkIns = entries.total(habitID: link.habitID, week: week)?.count ?? 0
                    guard checkIns < target else { continue }
                    let shortfall = target - checkIns
                    ranked.append(
                        (
                            GoalSuggestion(
                                kind: .habit(id: habit.id, name: habit.name, checkIns: checkIns, target: target),
                                goalID: goal.id, goalTitle: goal.title, shortfall: shortfall,
                                text: "\(habit.name): \(shortfall) more \(when) for \(goal.title)"),
                            goalIndex, habit.name
                        ))
                }
            case .recurringTask:
                let doneByTask = (taskCompletions[goal.id] ?? []).contains { week.contains($0) }
                let doneByHabit = goalLinks.contains { link in
                    link.covers(week) && (entries.total(habitID: link.habitID, week: week)?.count ?? 0) > 0
                }
                guard !doneByTask, !doneByHabit else { continue }
                ranked.append(
                    (
                        GoalSuggestion(
                            kind: .recurring, goalID: goal.id, goalTitle: goal.title, shortfall: 1,
                            text: "Schedule \(goal.title) \(when)"),
                        goalIndex, ""
                    ))
            case .count, .quantity, .level, .rating:
                continue
            }
        }
        return ranked.sorted { left, right in
            if left.suggestion.shortfall != right.suggestion.shortfall {
                return left.suggestion.shortfall > right.suggestion.shortfall
            }
            if left.goalIndex != right.goalIndex { return left.goalIndex < right.goalIndex }
            let leftName = left.habitName.lowercased()
            let rightName = right.habitName.lowercased()
            if leftName != rightName { return leftName < rightName }
            return left.habitName < right.habitName
        }.map(\.suggestion)
    }
}
