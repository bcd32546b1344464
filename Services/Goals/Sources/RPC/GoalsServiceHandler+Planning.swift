internal import HabitFlowInternalCredential
internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// Planning views, "Based on your goals" suggestions and reflection prompts (seed 000 US7, seed 004 §3.8–3.9;
/// DESIGN.md section 3a, "Suggestions and prompts", "Hierarchy"). Views and suggestions come from the same snapshot
/// ListGoals uses (one call to habits at most); prompts are static (`Domain/ReflectionPrompts.swift`). Nothing here
/// writes.
extension GoalsServiceHandler {
    /// How far ahead a planning view may look: ten years of weeks (a 10-year goal's horizon).
    static let maximumPlanningWeeksAhead = 520

    func getPlanningView(
        request: Habitflow_Goals_V1_GetPlanningViewRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_PlanningView {
        var validator = RequestValidator()
        let requested = request.hasWeek ? validator.week(request.week, field: "week") : nil
        let horizon = request.horizon == .unspecified ? nil : validator.horizon(request.horizon, field: "horizon")
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        let currentWeek = IsoWeek(containing: snapshot.today)
        let week = requested ?? currentWeek
        let latest = currentWeek.adding(weeks: Self.maximumPlanningWeeksAhead)
        if week > latest {
            throw RPCError.invalidArgument(
                field: "week",
                "must be at most \(Self.maximumPlanningWeeksAhead) weeks after the current week (\(currentWeek)), "
                    + "that is \(latest) or earlier, got \(week)")
        }

        let ordered: [GoalRecord] = snapshot.orderedGoals.filter { $0.state != GoalState.archived }
        var byID: [UUID: GoalRecord] = [:]
        for goal in snapshot.goals.goals { byID[goal.id] = goal }
        var children: [UUID: [String]] = [:]
        for goal in ordered {
            if let parentID = goal.parentGoalID { children[parentID, default: []].append(goal.id.lowercasedString) }
        }
        // Longest horizon first, then list order.
        var planned: [(goal: GoalRecord, position: Int)] = []
        for (position, goal) in ordered.enumerated()
        where goal.includes(week) && (horizon == nil || goal.horizon == horizon) {
            planned.append((goal, position))
        }
        planned.sort { left, right in
            left.goal.horizon != right.goal.horizon
                ? left.goal.horizon > right.goal.horizon : left.position < right.position
        }
        return .with {
            $0.week = week.proto
            $0.goals = planned.map { entry in
                let goal = entry.goal
                return .with {
                    $0.goal = snapshot.proto(of: goal)
                    $0.ancestorIds = Self.ancestors(of: goal, in: byID).map(\.lowercasedString)
                    $0.childIds = children[goal.id] ?? []
                }
            }
        }
    }

    /// The goal's parent chain among `goals`, root first (at most the deepest chain the rules allow).
    private static func ancestors(of goal: GoalRecord, in goals: [UUID: GoalRecord]) -> [UUID] {
        var chain: [UUID] = []
        var next = goal.parentGoalID
        while let id = next, let parent = goals[id], chain.count < GoalRules.maximumDepth, !chain.contains(id),
            id != goal.id
        {
            chain.append(id)
            next = parent.parentGoalID
        }
        return chain.reversed()
    }

    func listSuggestions(
        request: Habitflow_Goals_V1_ListSuggestionsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListSuggestionsResponse {
        var validator = RequestValidator()
        let requested = request.hasWeek ? validator.week(request.week, field: "week") : nil
        try validator.check()
        let userID = try CallerIdentity.requireUser()
        let snapshot = try await reader.snapshot(of: userID, options: CallOptions().propagating(from: context))
        let currentWeek = IsoWeek(containing: snapshot.today)
        let week = requested ?? currentWeek
        if week > currentWeek {
            throw RPCError.invalidArgument(
                field: "week", "must not be after the current week (\(currentWeek)), got \(week)")
        }
        let suggestions = GoalSuggestions.suggestions(
            for: week, currentWeek: currentWeek, user: userID, goals: snapshot.orderedGoals,
            statuses: snapshot.progress.mapValues { $0.status }, links: snapshot.goals.links,
            taskCompletions: snapshot.goals.taskCompletions, entries: snapshot.entries, habits: snapshot.habits)
        return .with {
            $0.week = week.proto
            $0.suggestions = suggestions.map(\.proto)
        }
    }

    func listReflectionPrompts(
        request: Habitflow_Goals_V1_ListReflectionPromptsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListReflectionPromptsResponse {
        var validator = RequestValidator()
        var section: PromptSection?
        switch request.section {
        case .unspecified: section = nil
        case .planning: section = .planning
        case .review: section = .review
        case .UNRECOGNIZED(let value):
            validator.reject(
                "section", "must be PROMPT_SECTION_PLANNING, PROMPT_SECTION_REVIEW or unset (both), got \(value)")
        }
        try validator.check()
        _ = try CallerIdentity.requireUser()
        return .with {
            $0.version = ReflectionPrompts.version
            $0.prompts = ReflectionPrompts.prompts(in: section).map(\.proto)
        }
    }
}

extension PromptSection {
    var proto: Habitflow_Goals_V1_PromptSection {
        switch self {
        case .planning: .planning
        case .review: .review
        }
    }
}

extension ReflectionPrompt {
    var proto: Habitflow_Goals_V1_ReflectionPrompt {
        .with {
            $0.id = id
            $0.section = section.proto
            $0.text = text
        }
    }
}

extension GoalSuggestion {
    var proto: Habitflow_Goals_V1_Suggestion {
        .with {
            switch kind {
            case .habit(let id, let name, let checkIns, let target):
                $0.habit = .with {
                    $0.habitID = id.lowercasedString
                    $0.habitName = name
                    $0.checkIns = Int32(clamping: checkIns)
                    $0.target = Int32(clamping: target)
                }
            case .recurring:
                $0.recurring = Habitflow_Goals_V1_RecurringSuggestion()
            }
            $0.goalID = goalID.lowercasedString
            $0.goalTitle = goalTitle
            $0.shortfall = Int32(clamping: shortfall)
            $0.text = text
        }
    }
}
