internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// The habits service as goals uses it: habit details for link checks, entry totals for progress, and holds on the
/// units quantity goals rely on. One call each; the habits service's own errors (NOT_FOUND for a habit that is not
/// the user's, UNAVAILABLE, ...) reach the caller as they are.
struct HabitsSource: Sendable {
    let client: Habitflow_Habits_V1_HabitsInternal.Client

    static let maximumHabitsPerCall = 100
    static let maximumDaysPerCall = 4_000

    /// The user's habits `habitIDs` (deleted ones included) and live categories.
    func lookup(user userID: UUID, habits habitIDs: [UUID], options: CallOptions) async throws
        -> (habits: [UUID: HabitInfo], categories: [CategoryInfo])
    {
        let response = try await client.lookupHabits(
            .with {
                $0.userID = userID.lowercasedString
                $0.habitIds = habitIDs.map(\.lowercasedString)
            }, options: options)
        return (Self.habits(response.habits), Self.categories(response.categories))
    }

    /// What `aggregate` answers: the user's habits data, or that the version the caller has is still current.
    enum Aggregate: Sendable {
        case unchanged
        case totals(EntryTotals, habits: [UUID: HabitInfo], categories: [CategoryInfo], version: Int64)
    }

    /// Entries of `habitIDs` per week from `first` through `last`, with the habits' details and the user's
    /// categories; `.unchanged` when `unlessVersion` is still the user's version in habits. With `changedSince` (the
    /// version of totals the caller keeps), only the weeks changed since, each whole (an emptied week with count 0).
    func aggregate(
        user userID: UUID, habits habitIDs: [UUID], from first: LocalDate, through last: LocalDate,
        unlessVersion: Int64?, changedSince: Int64? = nil, options: CallOptions
    ) async throws -> Aggregate {
        let response = try await client.aggregateEntries(
            .with {
                $0.userID = userID.lowercasedString
                $0.habitIds = habitIDs.map(\.lowercasedString)
                $0.startDate = first.habitsProto
                $0.endDate = last.habitsProto
                if let unlessVersion { $0.unlessVersion = unlessVersion }
                if let changedSince { $0.changedSinceVersion = changedSince }
                $0.includeDetails = true
            }, options: options)
        if response.unchanged { return .unchanged }
        var totals = EntryTotals()
        for aggregate in response.aggregates {
            guard let habitID = UUID(canonical: aggregate.habitID), let weekStart = aggregate.weekStart.localDate else {
                continue
            }
            totals.replace(
                habitID: habitID, weekStart: weekStart, count: Int(aggregate.entryCount), sum: aggregate.valueSum)
        }
        return .totals(
            totals, habits: Self.habits(response.habits), categories: Self.categories(response.categories),
            version: response.version)
    }

    /// Makes `holder` hold exactly `habitIDs` at `unit` (none releases them all).
    func setUnitHolds(user userID: UUID, holder: String, habits habitIDs: [UUID], unit: String, options: CallOptions)
        async throws
    {
        _ = try await client.setUnitHolds(
            .with {
                $0.userID = userID.lowercasedString
                $0.holder = holder
                $0.habitIds = habitIDs.map(\.lowercasedString)
                $0.unit = unit
            }, options: options)
    }

    private static func habits(_ summaries: [Habitflow_Habits_V1_HabitSummary]) -> [UUID: HabitInfo] {
        var habits: [UUID: HabitInfo] = [:]
        for summary in summaries {
            guard let id = UUID(canonical: summary.habitID) else { continue }
            habits[id] = HabitInfo(
                id: id, name: summary.name, unit: summary.unit.isEmpty ? nil : summary.unit,
                categoryID: UUID(canonical: summary.categoryID), deleted: summary.deleted)
        }
        return habits
    }

    private static func categories(_ summaries: [Habitflow_Habits_V1_CategorySummary]) -> [CategoryInfo] {
        summaries.compactMap { summary in
            UUID(canonical: summary.categoryID).map {
                CategoryInfo(id: $0, name: summary.name, position: Int(summary.position))
            }
        }
    }
}

extension LocalDate {
    var habitsProto: Habitflow_Habits_V1_LocalDate {
        .with {
            $0.year = Int32(year)
            $0.month = Int32(month)
            $0.day = Int32(day)
        }
    }
}

extension Habitflow_Habits_V1_LocalDate {
    var localDate: LocalDate? { LocalDate(year: Int(year), month: Int(month), day: Int(day)) }
}
