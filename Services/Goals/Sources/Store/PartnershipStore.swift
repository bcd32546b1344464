internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowPostgres
internal import HabitFlowServiceKit

/// The goals shared with a user (their partner's), with what their progress is derived from.
struct SharedWithUser: Sendable, Hashable {
    var goals: [GoalRecord] = []
    var links: [UUID: [GoalLinkRecord]] = [:]
    var assessments: [UUID: [AssessmentRecord]] = [:]
    var taskCompletions: [UUID: [LocalDate]] = [:]
    /// Each creator's zone: a shared goal's weeks are its creator's.
    var ownerZones: [UUID: UserTimeZone] = [:]
}

// Partnerships and shared goals (DESIGN.md section 3a, "Partners"; `0005_partnerships.sql`).
//
// Lock order, everywhere: the partnership row first, then the creator's users row, then (the trigger of
// `shared_goal_views`) the partner's. Sharing a goal and PartnershipEnded both lock the partnership row first, so a
// goal is never shared under a partnership whose end was already applied, and an end never misses a goal.
extension GoalsStore {
    /// The creator a partner's tombstone names once the creator's account is deleted: none (the nil UUID).
    static let deletedCreator = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    /// Records what goals learns of a partnership (an answer of social's or one of its events), in any order: the
    /// start is kept once known, an end is set once and never cleared. Locks the row until commit.
    func recordPartnership(
        _ transaction: PostgresTransaction, id: UUID, users: (UUID, UUID), startedAt: Date?, endedAt: Date?
    ) async throws {
        let (first, second) = users.0.uuidString < users.1.uuidString ? users : (users.1, users.0)
        // Nothing is recorded of a deleted account (its partnerships went with it; an event arriving after
        // UserDeleted would otherwise bring its id back). UserDeleted takes the same per-user lock before it removes
        // them, so the check below sees a deletion that committed while this waited.
        try await lockAgainstDeletion(transaction, of: first)
        try await lockAgainstDeletion(transaction, of: second)
        try await transaction.execute(
            """
            INSERT INTO partnerships (partnership_id, user_a, user_b, started_at, ended_at) \
            SELECT \(id), \(first), \(second), \(startedAt as Date?), \(endedAt as Date?) \
            WHERE NOT EXISTS (SELECT 1 FROM deleted_users WHERE user_id IN (\(first), \(second))) \
            ON CONFLICT (partnership_id) DO UPDATE SET \
            started_at = coalesce(partnerships.started_at, EXCLUDED.started_at), \
            ended_at = coalesce(partnerships.ended_at, EXCLUDED.ended_at)
            """)
    }

    /// A transaction-long lock on the user's id (not on a row: the user may be unknown here) that recording a
    /// partnership and deleting the account both take, so the two never interleave.
    private func lockAgainstDeletion(_ transaction: PostgresTransaction, of userID: UUID) async throws {
        _ = try await transaction.queryRow(
            "SELECT pg_advisory_xact_lock(hashtextextended('goals.partnerships:' || \(userID)::text, 0))")
    }

    /// A write of the user's that shares a goal under `partnership` (social's answer just now): the partnership row
    /// is recorded and locked before the user's row, and an ended partnership, or a partner whose account is gone,
    /// is ``GoalsError/noPartner``. Without a partnership, the plain ``write(user:_:)``.
    func write<Result>(
        user userID: UUID, sharingUnder partnership: PartnershipInfo?,
        _ body: (PostgresTransaction, Int64) async throws -> Result
    ) async throws -> Result {
        guard let partnership else { return try await write(user: userID, body) }
        return try await pool.transaction { transaction in
            try await recordPartnership(
                transaction, id: partnership.id, users: (partnership.userID, partnership.partnerID),
                startedAt: partnership.startedAt, endedAt: nil)
            let row = try await transaction.queryRow(
                """
                SELECT p.ended_at IS NOT NULL OR EXISTS (SELECT 1 FROM deleted_users d WHERE d.user_id = \
                \(partnership.partnerID)) FROM partnerships p WHERE p.partnership_id = \(partnership.id) FOR UPDATE
                """)
            if try row?.decode(0, as: Bool.self) ?? true { throw GoalsError.noPartner }
            try await lockLowerPartners(transaction, of: userID, and: [partnership.partnerID])
            guard let sequence = try await users.nextChangeSequence(transaction, user: userID) else {
                throw GoalsError.accountDeleted(userID)
            }
            return try await body(transaction, sequence)
        }
    }

    /// Locks the users rows of the user's partners (on shared goals either way, and `others`) whose ids are lower than
    /// the user's, lowest first, before the caller takes the user's own row. A change of a shared goal also takes the
    /// partner's row (the trigger of `shared_goal_views`); taking both in id order, always, keeps two partners who
    /// each share goals with the other from deadlocking when they write at the same moment.
    func lockLowerPartners(_ transaction: PostgresTransaction, of userID: UUID, and others: [UUID] = []) async throws {
        let partners = try await transaction.query(
            """
            SELECT partner_id FROM goals WHERE user_id = \(userID) AND partner_id IS NOT NULL \
            UNION SELECT user_id FROM goals WHERE partner_id = \(userID)
            """
        ).map { try $0.decode(0, as: UUID.self) }
        let lower = Set(partners + others).filter { $0.uuidString < userID.uuidString }
        for partner in lower.sorted(by: { $0.uuidString < $1.uuidString }) {
            _ = try await transaction.query("SELECT 1 FROM users WHERE user_id = \(partner) FOR UPDATE")
        }
    }

    /// A live goal shared with `partnerID` (someone else's); `nil` when there is none with that id.
    func sharedGoal(partner partnerID: UUID, id: UUID) async throws -> GoalRecord? {
        try await pool.queryRow(
            "SELECT * FROM goal_details WHERE partner_id = \(partnerID) AND id = \(id) AND deleted_at IS NULL"
        ).map(GoalRecord.init(row:))
    }

    /// The live goals shared with the user, read after the user's version like ``userGoals(user:version:)``: every
    /// change of one takes the user's next change value too (the trigger of `shared_goal_views`), so the data is never
    /// older than the version.
    func goalsShared(with userID: UUID) async throws -> SharedWithUser {
        var shared = SharedWithUser()
        for row in try await pool.query(
            """
            SELECT g.*, u.time_zone AS owner_time_zone FROM goal_details g JOIN users u ON u.user_id = g.user_id \
            WHERE g.partner_id = \(userID) AND g.deleted_at IS NULL ORDER BY g.created_at, g.id
            """)
        {
            let goal = try GoalRecord(row: row)
            shared.goals.append(goal)
            shared.ownerZones[goal.ownerID] = .stored(try row.decode("owner_time_zone", as: String.self))
        }
        guard !shared.goals.isEmpty else { return shared }
        let owners = Array(shared.ownerZones.keys)
        let ids = shared.goals.map(\.id)
        let links = try await pool.query(
            """
            SELECT * FROM goal_links WHERE user_id = ANY(\(owners)::uuid[]) AND goal_id = ANY(\(ids)::uuid[]) \
            ORDER BY linked_from, habit_id
            """
        ).map(GoalLinkRecord.init(row:))
        shared.links = Dictionary(grouping: links, by: \.goalID)
        if shared.goals.contains(where: { $0.type.isAssessed }) {
            let assessments = try await pool.query(
                """
                SELECT * FROM assessments WHERE user_id = ANY(\(owners)::uuid[]) AND goal_id = ANY(\(ids)::uuid[]) \
                AND deleted_at IS NULL ORDER BY local_date, created_at
                """
            ).map(AssessmentRecord.init(row:))
            shared.assessments = Dictionary(grouping: assessments, by: \.goalID)
        }
        if shared.goals.contains(where: { $0.type.linksTasks }) {
            for row in try await pool.query(
                """
                SELECT goal_id, completed_on FROM tasks WHERE user_id = ANY(\(owners)::uuid[]) \
                AND goal_id = ANY(\(ids)::uuid[]) AND completed_on IS NOT NULL ORDER BY completed_on
                """)
            {
                shared.taskCompletions[try row.decode(0, as: UUID.self), default: []].append(try row.decode(1))
            }
        }
        return shared
    }

    // MARK: - Events

    /// PartnershipStarted: only recorded (goals are shared explicitly, one by one).
    func partnershipStarted(_ transaction: PostgresTransaction, id: UUID, users: (UUID, UUID), at: Date)
        async throws
    {
        try await recordPartnership(transaction, id: id, users: users, startedAt: at, endedAt: nil)
    }

    /// PartnershipEnded: recorded (a goal shared under it later is refused), then every goal shared under it becomes
    /// its creator's personal goal; the former partner's links end this week (what they gave stays).
    func partnershipEnded(
        _ transaction: PostgresTransaction, id: UUID, users: (UUID, UUID), at: Date, clock: UserClock
    ) async throws {
        try await recordPartnership(transaction, id: id, users: users, startedAt: nil, endedAt: at)
        try await unshare(transaction, owners: [users.0, users.1], clock: clock) { owner in
            "SELECT id, partner_id FROM goals WHERE user_id = \(owner) AND partnership_id = \(id) ORDER BY id"
        }
    }

    /// UserDeleted (before the user's rows go): their partnerships go; goals shared with them become their
    /// creators' personal goals and lose every link of the deleted user's (their entries are gone from habits too);
    /// their own shared goals are unshared first, so their partners' feeds get the tombstones, which then name no
    /// creator (``deletedCreator``): nothing left in the schema names the account.
    func partnerAccountDeleted(_ transaction: PostgresTransaction, user userID: UUID, clock: UserClock) async throws {
        // Deleting the rows locks them: a share waiting on one (FOR UPDATE) then finds none and is refused. A
        // partnership event recording one now waits for this transaction, then finds the user deleted.
        try await lockAgainstDeletion(transaction, of: userID)
        try await transaction.execute("DELETE FROM partnerships WHERE user_a = \(userID) OR user_b = \(userID)")
        let owners = try await transaction.query(
            "SELECT DISTINCT user_id FROM goals WHERE partner_id = \(userID) OR (user_id = \(userID) AND shared)"
        ).map { try $0.decode(0, as: UUID.self) }
        try await unshare(transaction, owners: Set(owners), clock: clock) { owner in
            """
            SELECT id, partner_id FROM goals WHERE user_id = \(owner) AND partner_id IS NOT NULL \
            AND (partner_id = \(userID) OR user_id = \(userID)) ORDER BY id
            """
        }
        let linked = try await transaction.query(
            """
            DELETE FROM goal_links WHERE habit_user_id = \(userID) AND user_id <> \(userID) \
            RETURNING user_id, goal_id
            """
        ).map { (owner: try $0.decode(0, as: UUID.self), goal: try $0.decode(1, as: UUID.self)) }
        try await transaction.execute(
            """
            UPDATE shared_goal_views SET owner_id = \(Self.deletedCreator) \
            WHERE owner_id = \(userID) AND user_id <> \(userID)
            """)
        for (owner, goals) in Dictionary(grouping: linked, by: \.owner) {
            guard let sequence = try await users.nextChangeSequence(transaction, user: owner) else { continue }
            try await transaction.execute(
                """
                UPDATE goals SET change_seq = \(sequence), updated_at = \(clock.now) \
                WHERE user_id = \(owner) AND id = ANY(\(goals.map(\.goal))::uuid[])
                """)
        }
    }

    /// Makes the goals `goals(owner)` selects (id, partner) of each owner their creator's personal goals, stamped
    /// with the creator's next change value, taken (locking the creator's row, in the order of every write) before
    /// the goals are read; the partner's open links end with the current week in the creator's zone. The trigger of
    /// `shared_goal_views` stamps the partner's tombstone.
    private func unshare(
        _ transaction: PostgresTransaction, owners: Set<UUID>, clock: UserClock,
        goals: (UUID) -> PostgresQuery
    ) async throws {
        for owner in owners.sorted(by: { $0.uuidString < $1.uuidString }) {
            guard let sequence = try await users.nextChangeSequence(transaction, user: owner),
                let zone = try await transaction.queryRow("SELECT time_zone FROM users WHERE user_id = \(owner)")
            else { continue }
            let sunday = IsoWeek(containing: clock.today(in: .stored(try zone.decode(0, as: String.self)))).sunday
            for row in try await transaction.query(goals(owner)) {
                try await unshareGoal(
                    transaction, owner: owner, goal: try row.decode(0), partner: try row.decode(1), sunday: sunday,
                    sequence: sequence, now: clock.now)
            }
        }
    }

    /// One goal back to its creator alone: the partner's open links end on `sunday` (or with the week they began).
    func unshareGoal(
        _ transaction: PostgresTransaction, owner: UUID, goal goalID: UUID, partner: UUID, sunday: LocalDate,
        sequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE goal_links SET linked_until = greatest(\(sunday), linked_from + 6) \
            WHERE user_id = \(owner) AND goal_id = \(goalID) AND habit_user_id = \(partner) AND linked_until IS NULL
            """)
        try await transaction.execute(
            """
            UPDATE goals SET shared = false, partner_id = NULL, partnership_id = NULL, change_seq = \(sequence), \
            updated_at = \(now) WHERE user_id = \(owner) AND id = \(goalID)
            """)
    }
}
