public import HabitFlowCalendar
public import Foundation

/// Habits that met their target out of the habits that counted: "X% (Y/Z habits)" (seed 004 §3.5).
public struct WeeklyScore: Sendable, Hashable {
    /// Y
    public var met: Int
    /// Z
    public var total: Int

    public init(met: Int, total: Int) {
        self.met = met
        self.total = total
    }

    /// X = Y / Z × 100, rounded half up; 0 without habits.
    public var percent: Int { total == 0 ? 0 : (met * 200 + total) / (total * 2) }

    /// "X% (Y/Z habits)"
    public var display: String { "\(percent)% (\(met)/\(total) habits)" }

    /// The score of some habits' weeks.
    public init(_ weeks: some Sequence<HabitWeekTally>) {
        var met = 0
        var total = 0
        for week in weeks {
            total += 1
            if week.met { met += 1 }
        }
        self.init(met: met, total: total)
    }
}

/// One habit's completions in one week against that week's target.
public struct HabitWeekTally: Sendable, Hashable {
    public var habitID: UUID
    public var categoryID: UUID?
    /// Y: the target that week had.
    public var target: Int
    /// X: the entries of the week.
    public var completions: Int

    public init(habitID: UUID, categoryID: UUID?, target: Int, completions: Int) {
        self.habitID = habitID
        self.categoryID = categoryID
        self.target = target
        self.completions = completions
    }

    /// X may exceed Y ("8/7"); the habit met its target either way.
    public var met: Bool { completions >= target }

    /// "X/Y"
    public var progress: String { "\(completions)/\(target)" }

    /// min(X / Y, 1) × 100, rounded down: the habit's progress bar.
    public var percent: Int { target <= 0 ? 0 : min(100, completions * 100 / target) }
}

/// A category's share of its habits that met their target in a week.
public struct CategoryWeekScore: Sendable, Hashable {
    /// `nil`: Uncategorized.
    public var categoryID: UUID?
    public var name: String
    public var score: WeeklyScore

    public static let uncategorizedName = "Uncategorized"

    /// Every category in the given order (a category without habits that week scores 0/0), then Uncategorized
    /// when habits without a category counted that week.
    public static func scores(
        of tallies: [HabitWeekTally], categories: [(id: UUID, name: String)]
    ) -> [CategoryWeekScore] {
        let byCategory = Dictionary(grouping: tallies, by: \.categoryID)
        var scores = categories.map { category in
            CategoryWeekScore(
                categoryID: category.id, name: category.name, score: WeeklyScore(byCategory[category.id] ?? []))
        }
        let known = Set(categories.map(\.id))
        // Habits of a category missing from the list (it cannot happen while deletes move habits) count as
        // Uncategorized rather than vanish.
        let uncategorized = tallies.filter { $0.categoryID.map { !known.contains($0) } ?? true }
        if !uncategorized.isEmpty {
            scores.append(CategoryWeekScore(categoryID: nil, name: uncategorizedName, score: WeeklyScore(uncategorized)))
        }
        return scores
    }
}

/// The weeks of some habits, computed from their dated targets and their entry counts per week.
public enum WeekTallies {
    /// The tallies of the habits live in `week`, in the order given.
    ///
    /// - Parameter completions: entries per habit in that week.
    public static func tallies(
        of habits: [HabitRecord], in week: IsoWeek, completions: [UUID: Int]
    ) -> [HabitWeekTally] {
        habits.filter { $0.isLive(in: week) }.map { habit in
            HabitWeekTally(
                habitID: habit.id, categoryID: habit.categoryID, target: habit.target(in: week),
                completions: completions[habit.id] ?? 0)
        }
    }
}
