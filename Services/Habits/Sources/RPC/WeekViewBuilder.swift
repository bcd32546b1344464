internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowHabitsProtos

/// Turns a week's habits and entry counts into the week view: "X/Y" and dots per habit, today's progress, the weekly
/// score and the category scores.
struct WeekViewBuilder {
    var week: IsoWeek
    var today: LocalDate
    /// The habits live in `week` with their entries per day, the user's zone and categories.
    var data: WeekViewData

    var view: Habitflow_Habits_V1_WeekView {
        let habits = data.habits
        let perDay = data.dayCounts
        let todayIndex = week.contains(today) ? week.monday.days(until: today) : nil
        let tallies = data.tallies(in: week)
        return .with { view in
            view.week = week.proto
            view.weekName = week.description
            view.startDate = week.monday.proto
            view.endDate = week.sunday.proto
            view.today = today.proto
            view.timeZone = data.zone.name
            view.habits = zip(habits, tallies).map { habit, tally in
                let days = perDay[habit.id] ?? Array(repeating: 0, count: 7)
                return .with {
                    $0.habit = habit.proto
                    $0.weeklyTarget = Int32(tally.target)
                    $0.completions = Int32(tally.completions)
                    $0.progress = tally.progress
                    $0.doneDays = days.map { $0 > 0 }
                    $0.dayCompletions = days.map(Int32.init)
                    $0.met = tally.met
                    $0.percent = Int32(tally.percent)
                    $0.todayCompletions = Int32(todayIndex.map { days[$0] } ?? 0)
                }
            }
            view.score = WeeklyScore(tallies).proto
            view.categoryScores = CategoryWeekScore.scores(
                of: tallies, categories: data.categories.map { ($0.id, $0.name) }
            ).map(\.proto)
            if let todayIndex {
                view.todayProgress = .with {
                    $0.date = today.proto
                    $0.completedHabits = Int32(habits.count { (perDay[$0.id]?[todayIndex] ?? 0) > 0 })
                    $0.totalHabits = Int32(habits.count)
                }
            }
        }
    }
}

extension WeekViewData {
    /// Each habit's "X/Y" of `week`, the week the data was read for (its habits are those live in it), in the
    /// habits' order: what the view and the weekly score are made from.
    func tallies(in week: IsoWeek) -> [HabitWeekTally] {
        habits.map { habit in
            HabitWeekTally(
                habitID: habit.id, categoryID: habit.categoryID, target: habit.target(in: week),
                completions: dayCounts[habit.id]?.reduce(0, +) ?? 0)
        }
    }
}
