internal import HabitFlowGatewayProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit

/// `habitflow.gateway.v1.GatewayService`: the dashboard, assembled from the services that own its parts.
///
/// Every part is fetched concurrently under its own deadline (the part timeout, or what is left of the call's,
/// whichever is shorter). A part that fails is left out and named in `missing_parts` with its status: the client
/// shows what it has. Goals and the leaderboard are listed as missing (`UNIMPLEMENTED`) until the goals and social
/// services exist.
struct DashboardService: Habitflow_Gateway_V1_GatewayService.Handler {
    let habits: Habitflow_Habits_V1_HabitsService.Client
    let partTimeout: Duration

    /// Parts whose service is not part of the system yet.
    static let undeployedParts: [(Habitflow_Gateway_V1_DashboardPart, String)] = [
        (.goals, "the goals service is not deployed yet"),
        (.leaderboard, "the social service is not deployed yet"),
    ]

    private enum PartResult: Sendable {
        case habits(Habitflow_Habits_V1_WeekView)
        case missing(Habitflow_Gateway_V1_MissingPart)
    }

    func getDashboard(
        request: Habitflow_Gateway_V1_GetDashboardRequest, context: ServerContext
    ) async throws -> Habitflow_Gateway_V1_Dashboard {
        guard let caller = GatewayCallInfo.current?.caller else {
            throw RPCError.unauthenticated(reason: "TOKEN_MISSING", "the dashboard needs a signed-in user")
        }
        let options = partOptions(for: caller, context: context)
        let habits = self.habits
        var dashboard = Habitflow_Gateway_V1_Dashboard()
        let results = await withTaskGroup(of: PartResult.self) { group in
            group.addTask {
                do {
                    return .habits(try await habits.getWeek(Habitflow_Habits_V1_GetWeekRequest(), options: options))
                } catch {
                    return .missing(Self.missing(.habits, service: "habits", error: error))
                }
            }
            var results: [PartResult] = []
            for await result in group { results.append(result) }
            return results
        }
        for result in results {
            switch result {
            case .habits(let week): Self.fill(&dashboard, from: week)
            case .missing(let part): dashboard.missingParts.append(part)
            }
        }
        for (part, reason) in Self.undeployedParts {
            dashboard.missingParts.append(
                .with {
                    $0.part = part
                    $0.code = Int32(RPCStatusCode.unimplemented.rawValue)
                    $0.message = reason
                })
        }
        dashboard.missingParts.sort { $0.part.rawValue < $1.part.rawValue }
        return dashboard
    }

    /// A part's call: on the caller's behalf, under the part's own deadline, with the call's request id and trace.
    private func partOptions(for caller: AuthenticatedCaller, context: ServerContext) -> CallOptions {
        var options = CallOptions.onBehalf(
            of: caller.userID, sessionID: caller.sessionID, clientAddress: GatewayCallInfo.current?.clientAddress,
            timeout: partTimeout)
        if let requestID = GatewayCallInfo.current?.requestID {
            options.metadata.addRequestID(requestID)
        }
        return options.propagating(from: context)
    }

    private static func missing(
        _ part: Habitflow_Gateway_V1_DashboardPart, service: String, error: any Error
    ) -> Habitflow_Gateway_V1_MissingPart {
        let status = error as? RPCError ?? RPCError(.unknown, "\(error)")
        return .with {
            $0.part = part
            $0.code = Int32(status.code.rawValue)
            $0.message = "the \(service) service answered \(status.code): \(status.message)"
        }
    }

    private static func fill(_ dashboard: inout Habitflow_Gateway_V1_Dashboard, from week: Habitflow_Habits_V1_WeekView) {
        dashboard.weekName = week.weekName
        dashboard.startDate = date(week.startDate)
        dashboard.endDate = date(week.endDate)
        dashboard.today = date(week.today)
        dashboard.timeZone = week.timeZone
        dashboard.weeklyScore = score(week.score)
        dashboard.habits = week.habits.map { habitWeek in
            .with {
                $0.habitID = habitWeek.habit.id
                $0.name = habitWeek.habit.name
                $0.categoryID = habitWeek.habit.categoryID
                $0.completions = habitWeek.completions
                $0.weeklyTarget = habitWeek.weeklyTarget
                $0.progress = habitWeek.progress
                $0.met = habitWeek.met
                $0.doneDays = habitWeek.doneDays
            }
        }
        dashboard.categoryScores = week.categoryScores.map { category in
            .with {
                $0.categoryID = category.categoryID
                $0.categoryName = category.categoryName
                $0.score = score(category.score)
            }
        }
    }

    private static func date(_ date: Habitflow_Habits_V1_LocalDate) -> Habitflow_Gateway_V1_Date {
        .with {
            $0.year = date.year
            $0.month = date.month
            $0.day = date.day
        }
    }

    private static func score(_ score: Habitflow_Habits_V1_WeeklyScore) -> Habitflow_Gateway_V1_Score {
        .with {
            $0.metHabits = score.metHabits
            $0.totalHabits = score.totalHabits
            $0.percent = score.percent
            $0.display = score.display
        }
    }
}
