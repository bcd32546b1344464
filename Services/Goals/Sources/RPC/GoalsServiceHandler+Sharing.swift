internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowRPC

/// Shared goals (DESIGN.md section 3a, "Partners"): who may do what with a goal.
///
/// A shared goal is its creator's (stored under them); their partner sees it (through the reader's snapshot) and
/// tracks it: links habits of their own and adds assessments. Only the creator edits, pauses, resumes, completes,
/// archives, restores or deletes it: the partner gets `PERMISSION_DENIED` `NOT_GOAL_OWNER` (they can see it, so
/// not `NOT_FOUND`); anyone else gets `NOT_FOUND`.
extension GoalsServiceHandler {
    /// A goal the caller may track: their own live goal, or one shared with them; with the creator and the
    /// creator's today (a shared goal's weeks are its creator's).
    struct TrackedGoal {
        var goal: GoalRecord
        var owner: UUID
        var ownerToday: LocalDate
    }

    /// The caller's own live goal, or a live goal shared with them; else ``GoalsError/goalNotFound(_:)``.
    func trackedGoal(_ goalID: UUID, user: (id: UUID, today: LocalDate)) async throws -> TrackedGoal {
        if let goal = try await store.goal(user: user.id, id: goalID), !goal.isDeleted {
            return TrackedGoal(goal: goal, owner: user.id, ownerToday: user.today)
        }
        guard let goal = try await store.sharedGoal(partner: user.id, id: goalID) else {
            throw GoalsError.goalNotFound(goalID)
        }
        let ownerVersion = try await store.userVersion(goal.ownerID, now: clock.now)
        return TrackedGoal(goal: goal, owner: goal.ownerID, ownerToday: clock.today(in: ownerVersion.zone))
    }

    /// Runs a change only the creator may make: a goal the caller does not have but that is shared with them is
    /// ``GoalsError/notGoalOwner(_:)`` instead of not found.
    func ownerOnly<Result>(_ goalID: UUID, user userID: UUID, _ body: () async throws -> Result) async throws
        -> Result
    {
        do {
            return try await body()
        } catch GoalsError.goalNotFound(let id) where id == goalID {
            if try await store.sharedGoal(partner: userID, id: goalID) != nil {
                throw GoalsError.notGoalOwner(goalID)
            }
            throw GoalsError.goalNotFound(goalID)
        }
    }

    /// The caller's partnership now, for sharing a goal: asked of social (its errors, UNAVAILABLE while it is down,
    /// reach the client); none is ``GoalsError/noPartner``.
    func requirePartnership(user userID: UUID, context: ServerContext) async throws -> PartnershipInfo {
        guard
            let partnership = try await partners.partnership(
                of: userID, options: CallOptions().propagating(from: context))
        else { throw GoalsError.noPartner }
        return partnership
    }
}
