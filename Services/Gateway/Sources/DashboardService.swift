internal import HabitFlowGatewayProtos
internal import HabitFlowGoalsProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import HabitFlowSocialProtos
internal import Logging

/// `GatewayService/GetDashboard`: the dashboard, assembled from the services that own its parts.
///
/// Parts and where they come from, each called on the caller's behalf through the service's public API (as the
/// client's own call would be; internal APIs refuse calls signed as the gateway, since forwarded client calls are):
///
/// | part | call |
/// |---|---|
/// | habits (week, weekly score, habits, category scores) | `habitflow.habits.v1.HabitsService/GetWeek` |
/// | goals (active and paused goals with progress; the latest category ratings from reviews) | `habitflow.goals.v1.GoalsService/GetGoalsOverview` (ListGoals' first page and GetCategoryRatings' latest ratings in one call) |
/// | leaderboard (the top 5 of the caller and their friends this week, and the caller's line) | `habitflow.social.v1.SocialService/GetLeaderboard` (a page of 5) |
///
/// Every part is fetched concurrently under its own deadline (the part timeout, or what is left of the call's,
/// whichever is shorter). A part that fails is left out and named in `missing_parts` with its status (`UNAVAILABLE`
/// when its service is down, `DEADLINE_EXCEEDED` when it was too slow): the client shows what it has. Its message
/// names the service and what to do; what happened (an address, a connection error) goes to the log.
struct DashboardService: Sendable {
    let habits: Habitflow_Habits_V1_HabitsService.Client
    let goals: Habitflow_Goals_V1_GoalsService.Client
    let social: Habitflow_Social_V1_SocialService.Client
    let partTimeout: Duration
    let logger: Logger

    /// Lines of the leaderboard the dashboard shows.
    static let leaderboardTop: Int32 = 5

    /// The goals the dashboard shows: those still being worked on (active, with or without progress yet, and
    /// paused), not completed, expired or archived ones.
    static let dashboardGoalStatuses: [Habitflow_Goals_V1_GoalStatus] = [.notStarted, .inProgress, .paused]
    /// One page holds them all: a user has at most 10 active or paused goals of their own, plus those their partner
    /// shares with them (at most 10 more).
    static let goalsPageSize: Int32 = 100

    private enum PartResult: Sendable {
        case habits(Habitflow_Habits_V1_WeekView)
        case goals([Habitflow_Goals_V1_Goal], ratings: [Habitflow_Goals_V1_LatestCategoryRating])
        case leaderboard(Habitflow_Social_V1_Leaderboard)
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
        let goals = self.goals
        let social = self.social
        let logger = self.logger
        var dashboard = Habitflow_Gateway_V1_Dashboard()
        let results = await withTaskGroup(of: PartResult.self) { group in
            group.addTask {
                do {
                    return .habits(try await habits.getWeek(Habitflow_Habits_V1_GetWeekRequest(), options: options))
                } catch {
                    return .missing(Self.missing(.habits, service: "habits", error: error, logger: logger))
                }
            }
            group.addTask {
                do {
                    let request = Habitflow_Goals_V1_GetGoalsOverviewRequest.with {
                        $0.statuses = Self.dashboardGoalStatuses
                        $0.pageSize = Self.goalsPageSize
                    }
                    let overview = try await goals.getGoalsOverview(request, options: options)
                    return .goals(overview.goals, ratings: overview.latestCategoryRatings)
                } catch {
                    return .missing(Self.missing(.goals, service: "goals", error: error, logger: logger))
                }
            }
            group.addTask {
                do {
                    let request = Habitflow_Social_V1_GetLeaderboardRequest.with { $0.pageSize = Self.leaderboardTop }
                    return .leaderboard(try await social.getLeaderboard(request, options: options))
                } catch {
                    return .missing(Self.missing(.leaderboard, service: "social", error: error, logger: logger))
                }
            }
            var results: [PartResult] = []
            for await result in group { results.append(result) }
            return results
        }
        for result in results {
            switch result {
            case .habits(let week): Self.fill(&dashboard, from: week)
            case .goals(let goals, let ratings):
                dashboard.goals = goals.map(Self.goalProgress)
                dashboard.categoryRatings = ratings.map(Self.categoryRating)
            case .leaderboard(let top): dashboard.leaderboard = Self.leaderboard(top)
            case .missing(let part): dashboard.missingParts.append(part)
            }
        }
        dashboard.missingParts.sort { $0.part.rawValue < $1.part.rawValue }
        return dashboard
    }

    /// A part's call: on the caller's behalf, under the part's own deadline, with the call's request id and trace.
    private func partOptions(for caller: AuthenticatedCaller, context: ServerContext) -> CallOptions {
        CallOptions.onBehalf(of: caller, info: GatewayCallInfo.current, timeout: partTimeout).propagating(from: context)
    }

    /// A part that failed with `error`, as the client sees it: the status code and which service, and the error in
    /// the log (a part's call made here, not by the service, carries an address and a system error in its cause).
    static func missing(
        _ part: Habitflow_Gateway_V1_DashboardPart, service: String, error: any Error, logger: Logger
    ) -> Habitflow_Gateway_V1_MissingPart {
        let status = error as? RPCError
        let code = status?.code ?? .unknown
        logger.warning(
            "dashboard part missing",
            metadata: [
                "part": "\(part)", "service": "\(service)", "code": "\(code)",
                "error": "\(status.map { String(describing: $0) } ?? String(describing: error))",
                "request_id": "\(GatewayCallInfo.current?.requestID ?? "")",
            ])
        return .with {
            $0.part = part
            $0.code = Int32(code.rawValue)
            $0.message =
                switch code {
                case .unavailable: "the \(service) service is unavailable; retry later"
                case .deadlineExceeded: "the \(service) service did not answer in time; retry later"
                case .unimplemented: "the \(service) service does not offer this part yet"
                default: "the \(service) service could not give this part (\(code))"
                }
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

    private static func goalProgress(_ goal: Habitflow_Goals_V1_Goal) -> Habitflow_Gateway_V1_GoalProgress {
        .with {
            $0.goalID = goal.id
            $0.title = goal.title
            $0.icon = goal.icon
            $0.categoryID = goal.categoryID
            $0.status = status(goal.status)
            $0.display = goal.progress.display
            $0.percent = goal.progress.percent
            $0.overallPercent = goal.progress.overallPercent
            $0.thisWeekMet = goal.progress.thisWeekMet
            $0.shared = goal.shared
        }
    }

    private static func leaderboard(_ top: Habitflow_Social_V1_Leaderboard) -> Habitflow_Gateway_V1_LeaderboardTop {
        .with {
            $0.top = top.entries.map(leaderboardLine)
            $0.me = leaderboardLine(top.me)
            $0.total = top.total
        }
    }

    private static func leaderboardLine(
        _ entry: Habitflow_Social_V1_LeaderboardEntry
    ) -> Habitflow_Gateway_V1_LeaderboardLine {
        .with {
            $0.rank = entry.rank
            $0.userID = entry.person.userID
            $0.username = entry.person.username
            $0.displayName = entry.person.displayName
            $0.display = entry.score.display
            $0.percent = entry.score.percent
            $0.habitCount = entry.score.totalHabits
            $0.me = entry.me
        }
    }

    /// A category's latest review rating (not its weekly score from habits: that is `category_scores`).
    private static func categoryRating(
        _ rating: Habitflow_Goals_V1_LatestCategoryRating
    ) -> Habitflow_Gateway_V1_CategoryRating {
        .with {
            $0.categoryID = rating.categoryID
            $0.categoryName = rating.categoryName
            $0.rating = rating.rating
            $0.date = .with {
                $0.year = rating.date.year
                $0.month = rating.date.month
                $0.day = rating.date.day
            }
        }
    }

    /// The gateway's copy of goals' `GoalStatus` (same numbers; spelled out so a new status is a compile error here).
    static func status(_ status: Habitflow_Goals_V1_GoalStatus) -> Habitflow_Gateway_V1_GoalStatus {
        switch status {
        case .unspecified: .unspecified
        case .notStarted: .notStarted
        case .inProgress: .inProgress
        case .paused: .paused
        case .completed: .completed
        case .expired: .expired
        case .archived: .archived
        case .UNRECOGNIZED(let value): .UNRECOGNIZED(value)
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
