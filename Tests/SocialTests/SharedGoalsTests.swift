import Foundation
import HabitFlowEvents
import HabitFlowGoalsProtos
import HabitFlowHabitsProtos
import HabitFlowRPC
import HabitFlowSocialProtos
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

typealias SharedGoal = Habitflow_Goals_V1_Goal

/// Shared goals (DESIGN.md section 3a, "Partners") with real partners: social's public API makes the partnership,
/// goals asks social's `GetPartnership` when a goal is shared, and partnership events reach goals (by social's relay,
/// and by hand where a test needs an order).
@Suite struct SharedGoalsTests {
    /// A fresh pair of partners: `owner` asked, `partner` accepted.
    private func partners() async throws -> (owner: TestUser, partner: TestUser, partnershipID: String) {
        let owner = try await TestUser()
        let partner = try await TestUser()
        let partnership = try await owner.makePartners(with: partner)
        return (owner, partner, partnership.id)
    }

    @Test func sharingWithoutAPartnerIsRefused() async throws {
        let loner = try await TestUser()
        let refused = await expectError(.failedPrecondition) {
            _ = try await loner.createSharedGoal("Together")
        }
        #expect(preconditionType(refused) == "NO_PARTNER")
        let personal = try await loner.createGoal("Alone")
        let update = await expectError(.failedPrecondition) {
            _ = try await loner.goals.updateGoal(
                .with {
                    $0.goal.id = personal.id
                    $0.goal.shared = true
                    $0.updateMask.paths = ["shared"]
                }, options: loner.options)
        }
        #expect(preconditionType(update) == "NO_PARTNER")
    }

    @Test func bothPartnersSeeTheSharedGoalAndAThirdUserDoesNot() async throws {
        let (owner, partner, _) = try await partners()
        let goal = try await owner.createSharedGoal("Run together")
        #expect(goal.shared)
        #expect(goal.ownerID == owner.userID)
        #expect(goal.partnerID == partner.userID)
        let seen = try await partner.getGoal(goal.id)
        #expect(seen.shared && seen.partnerID == partner.userID && seen.ownerID == owner.userID)
        #expect(try await partner.listGoals().map(\.id).contains(goal.id))
        #expect(try await owner.listGoals().map(\.id).contains(goal.id))
        let active = try await Habitflow_Goals_V1_GoalsInternal.Client(transport: owner.fixture.goalsInternalChannel)
            .listActiveGoals(.with { $0.userID = partner.userID })
        #expect(active.goals.map(\.id).contains(goal.id))
        #expect(!(try await partner.goals.getGoalHistory(.with { $0.goalID = goal.id }, options: partner.options))
            .weeks.isEmpty)
        let changes = try await partner.goalChanges()
        #expect(changes.contains { $0.goal.id == goal.id && !$0.deleted && $0.goal.shared })

        let stranger = try await TestUser()
        await expectError(.notFound) { _ = try await stranger.getGoal(goal.id) }
        await expectError(.notFound) {
            _ = try await stranger.goals.archiveGoal(.with { $0.goalID = goal.id }, options: stranger.options)
        }
        #expect(try await !stranger.listGoals().map(\.id).contains(goal.id))
    }

    @Test func onlyTheCreatorChangesASharedGoalButBothTrackIt() async throws {
        let (owner, partner, _) = try await partners()
        let goal = try await owner.createSharedGoal("Run together")
        for call in [
            { _ = try await partner.goals.updateGoal(
                .with {
                    $0.goal.id = goal.id
                    $0.goal.title = "Mine now"
                    $0.updateMask.paths = ["title"]
                }, options: partner.options) },
            { _ = try await partner.goals.archiveGoal(.with { $0.goalID = goal.id }, options: partner.options) },
            { _ = try await partner.goals.pauseGoal(.with { $0.goalID = goal.id }, options: partner.options) },
            { _ = try await partner.goals.deleteGoal(.with { $0.goalID = goal.id }, options: partner.options) },
        ] as [@Sendable () async throws -> Void] {
            let refused = await expectError(.permissionDenied) { try await call() }
            #expect(refused?.errorReason == "NOT_GOAL_OWNER")
        }
        #expect(try await owner.getGoal(goal.id).title == "Run together")

        let rating = try await owner.createSharedGoal("Feel fit", type: .rating) { $0.target.ratingScale = 5 }
        let assessed = try await partner.goals.addAssessment(
            .with {
                $0.goalID = rating.id
                $0.value = 4
            }, options: partner.options)
        #expect(assessed.goalID == rating.id)
        #expect(try await owner.getGoal(rating.id).progress.value == 4)
        #expect(try await partner.getGoal(rating.id).progress.value == 4)
    }

    @Test func progressSumsBothPartnersEntriesAndSeesThePartnersCheckInAtOnce() async throws {
        let (owner, partner, _) = try await partners()
        let mine = try await owner.createHabit("Run")
        let theirs = try await partner.createHabit("Jog")
        let goal = try await owner.createSharedGoal("Run 20 times", habits: [mine.id])
        let linked = try await partner.goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = theirs.id
            }, options: partner.options)
        #expect(linked.links.contains { $0.habitID == theirs.id && $0.userID == partner.userID })
        // Another user's habit is not the partner's to link.
        await expectError(.notFound) {
            _ = try await partner.goals.linkHabit(
                .with {
                    $0.goalID = goal.id
                    $0.habitID = mine.id
                }, options: partner.options)
        }

        try await owner.checkIn(mine)
        #expect(try await owner.getGoal(goal.id).progress.value == 1)
        // The owner's snapshot is warm: the partner's check-in shows at once.
        try await partner.checkIn(theirs)
        #expect(try await owner.getGoal(goal.id).progress.value == 2)
        #expect(try await partner.getGoal(goal.id).progress.value == 2)

        // Two check-ins at the same moment, one each: both count.
        async let ownerCheckIn: Void = owner.checkIn(mine)
        async let partnerCheckIn: Void = partner.checkIn(theirs)
        _ = try await (ownerCheckIn, partnerCheckIn)
        #expect(try await owner.getGoal(goal.id).progress.value == 4)
        #expect(try await partner.getGoal(goal.id).progress.value == 4)
        let history = try await owner.goals.getGoalHistory(.with { $0.goalID = goal.id }, options: owner.options)
        #expect(history.weeks.last?.value == 4)
    }

    @Test func theLimitCountsASharedGoalForItsCreatorOnly() async throws {
        let (owner, partner, _) = try await partners()
        _ = try await owner.createSharedGoal("Shared")
        for index in 1...9 { _ = try await owner.createGoal("Mine \(index)") }
        let refused = await expectError(.failedPrecondition) { _ = try await owner.createGoal("One too many") }
        #expect(preconditionType(refused) == "ACTIVE_GOAL_LIMIT")
        for index in 1...10 { _ = try await partner.createGoal("Theirs \(index)") }
        #expect(try await partner.listGoals().count == 11)
    }

    @Test func whenThePartnershipEndsTheGoalIsTheCreatorsAndThePartnerLosesIt() async throws {
        let (owner, partner, partnershipID) = try await partners()
        let mine = try await owner.createHabit("Run")
        let theirs = try await partner.createHabit("Jog")
        let goal = try await owner.createSharedGoal("Run 20 times", habits: [mine.id])
        _ = try await partner.goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = theirs.id
            }, options: partner.options)
        try await owner.checkIn(mine)
        try await partner.checkIn(theirs)
        let cursor = try await partner.goals.listChanges(.init(), options: partner.options).nextCursor

        _ = try await owner.social.endPartnership(.init(), options: owner.options)
        try await owner.fixture.deliverPartnershipEnded(partnershipID, owner, partner)
        let personal = try await eventually { try await owner.getGoal(goal.id) } until: { !$0.shared }
        #expect(personal.partnerID.isEmpty)
        // The partner's link ends this week: what they gave stays.
        let link = try #require(personal.links.first { $0.habitID == theirs.id })
        #expect(link.hasLinkedUntil)
        #expect(personal.progress.value == 2)
        let history = try await owner.goals.getGoalHistory(.with { $0.goalID = goal.id }, options: owner.options)
        #expect(history.weeks.last?.value == 2)

        await expectError(.notFound) { _ = try await partner.getGoal(goal.id) }
        #expect(try await !partner.listGoals().map(\.id).contains(goal.id))
        let changes = try await partner.goals.listChanges(.with { $0.cursor = cursor }, options: partner.options)
        #expect(changes.changes.contains { $0.goal.id == goal.id && $0.deleted })
        // The owner can share goals no more, and a late PartnershipEnded changes nothing.
        try await owner.fixture.deliverPartnershipEnded(partnershipID, owner, partner)
        #expect(try await owner.getGoal(goal.id).progress.value == 2)
    }

    @Test func whenThePartnersAccountIsDeletedTheirContributionLeaves() async throws {
        let (owner, partner, _) = try await partners()
        let mine = try await owner.createHabit("Run")
        let theirs = try await partner.createHabit("Jog")
        let goal = try await owner.createSharedGoal("Run 20 times", habits: [mine.id])
        _ = try await partner.goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = theirs.id
            }, options: partner.options)
        try await owner.checkIn(mine)
        try await partner.checkIn(theirs)
        #expect(try await owner.getGoal(goal.id).progress.value == 2)
        try await partner.deleteAccount()
        let personal = try await owner.getGoal(goal.id)
        #expect(!personal.shared && personal.partnerID.isEmpty)
        #expect(!personal.links.contains { $0.userID == partner.userID })
        #expect(personal.progress.value == 1)
    }

    @Test func socialsRelayEndsTheSharingWhenAPartnerEndsThePartnership() async throws {
        let (owner, partner, _) = try await partners()
        let goal = try await owner.createSharedGoal("Together")
        // The partner ends it; social's relay delivers PartnershipEnded to goals (nothing by hand here).
        _ = try await partner.social.endPartnership(.init(), options: partner.options)
        let personal = try await eventually { try await owner.getGoal(goal.id) } until: { !$0.shared }
        #expect(!personal.shared && personal.partnerID.isEmpty)
        await expectError(.notFound) { _ = try await partner.getGoal(goal.id) }
        let refused = await expectError(.failedPrecondition) { _ = try await owner.createSharedGoal("Again") }
        #expect(preconditionType(refused) == "NO_PARTNER")
    }

    @Test func theCreatorUnsharesAndSharesAgain() async throws {
        let (owner, partner, _) = try await partners()
        let theirs = try await partner.createHabit("Jog")
        let goal = try await owner.createSharedGoal("Together")
        _ = try await partner.goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = theirs.id
            }, options: partner.options)
        let cursor = try await partner.goals.listChanges(.init(), options: partner.options).nextCursor
        let unshared = try await owner.setShared(goal.id, false)
        #expect(!unshared.shared && unshared.partnerID.isEmpty)
        #expect(unshared.links.first { $0.habitID == theirs.id }?.hasLinkedUntil == true)
        await expectError(.notFound) { _ = try await partner.getGoal(goal.id) }
        let changes = try await partner.goals.listChanges(.with { $0.cursor = cursor }, options: partner.options)
        #expect(changes.changes.contains { $0.goal.id == goal.id && $0.deleted })

        let shared = try await owner.setShared(goal.id, true)
        #expect(shared.shared && shared.partnerID == partner.userID)
        #expect(try await partner.getGoal(goal.id).shared)
        let again = try await partner.goals.listChanges(
            .with { $0.cursor = changes.nextCursor }, options: partner.options)
        #expect(again.changes.contains { $0.goal.id == goal.id && !$0.deleted })
    }

    @Test func eachPartnerUnlinksOnlyTheirOwnHabits() async throws {
        let (owner, partner, _) = try await partners()
        let mine = try await owner.createHabit("Run")
        let theirs = try await partner.createHabit("Jog")
        let goal = try await owner.createSharedGoal("Together", habits: [mine.id])
        _ = try await partner.goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = theirs.id
            }, options: partner.options)
        // The partner's unlink of the creator's habit leaves it linked.
        let kept = try await partner.goals.unlinkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = mine.id
            }, options: partner.options)
        #expect(kept.links.contains { $0.habitID == mine.id && !$0.hasLinkedUntil })
        let unlinked = try await partner.goals.unlinkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = theirs.id
            }, options: partner.options)
        #expect(unlinked.links.contains { $0.habitID == theirs.id && $0.hasLinkedUntil })
    }

    @Test func aSharedQuantityGoalHoldsThePartnersUnitUntilItIsDeleted() async throws {
        let (owner, partner, _) = try await partners()
        let ride = try await partner.habits.createHabit(
            .with {
                $0.name = "Ride"
                $0.unit = "km"
            }, options: partner.options)
        let goal = try await owner.createSharedGoal("Ride 500 km", type: .quantity) { $0.target.unit = "km" }
        _ = try await partner.goals.linkHabit(
            .with {
                $0.goalID = goal.id
                $0.habitID = ride.id
            }, options: partner.options)
        let changeUnit = {
            _ = try await partner.habits.updateHabit(
                .with {
                    $0.habit.id = ride.id
                    $0.habit.unit = "mi"
                    $0.updateMask.paths = ["unit"]
                }, options: partner.options)
        }
        await expectError(.failedPrecondition) { try await changeUnit() }
        _ = try await owner.goals.deleteGoal(.with { $0.goalID = goal.id }, options: owner.options)
        try await changeUnit()
    }

    @Test func partnersWhoEachShareAGoalWriteAtTheSameMomentWithoutDeadlock() async throws {
        let (owner, partner, _) = try await partners()
        let ownersGoal = try await owner.createSharedGoal("Mine, shared")
        let partnersGoal = try await partner.createSharedGoal("Theirs, shared")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for round in 0..<10 {
                group.addTask { _ = try await owner.rename(ownersGoal.id, "Mine \(round)") }
                group.addTask { _ = try await partner.rename(partnersGoal.id, "Theirs \(round)") }
            }
            try await group.waitForAll()
        }
        #expect(try await partner.getGoal(ownersGoal.id).title.hasPrefix("Mine "))
        #expect(try await owner.getGoal(partnersGoal.id).title.hasPrefix("Theirs "))
        #expect(try await owner.listGoals().count == 2)
        #expect(try await partner.listGoals().count == 2)
    }

    @Test func theDeletedCreatorsSharedGoalsLeaveThePartner() async throws {
        let (owner, partner, _) = try await partners()
        let goal = try await owner.createSharedGoal("Together")
        let cursor = try await partner.goals.listChanges(.init(), options: partner.options).nextCursor
        try await owner.deleteAccount()
        await expectError(.notFound) { _ = try await partner.getGoal(goal.id) }
        let changes = try await partner.goals.listChanges(.with { $0.cursor = cursor }, options: partner.options)
        // A tombstone with the goal's id only: nothing of the deleted account is kept, not even its id.
        #expect(changes.changes.contains { $0.goal.id == goal.id && $0.deleted && $0.goal.ownerID.isEmpty })
    }

    @Test func partnershipEventsApplyInAnyOrder() async throws {
        let fixture = try await SocialFixture.shared.value
        let (owner, partner, partnershipID) = try await partners()
        // Ended before Started, twice, then Started: the partnership stays ended, and sharing under it is refused
        // even while social (whose own end has not happened) still names the partner.
        try await fixture.deliverPartnershipEnded(partnershipID, owner, partner)
        try await fixture.deliverPartnershipEnded(partnershipID, owner, partner)
        var started = Habitflow_Events_V1_PartnershipStarted()
        started.partnershipID = partnershipID
        started.userID = owner.userID
        started.partnerUserID = partner.userID
        started.startedAt = Google_Protobuf_Timestamp(date: Date())
        try await fixture.deliver(
            started, aggregate: ("partnership", partnershipID), source: "social", to: [fixture.goalsInternalChannel])
        let refused = await expectError(.failedPrecondition) { _ = try await owner.createSharedGoal("Late") }
        #expect(preconditionType(refused) == "NO_PARTNER")
    }

    @Test func userDeletedAndPartnershipEndedInBothOrders() async throws {
        for endFirst in [true, false] {
            let (owner, partner, partnershipID) = try await partners()
            let theirs = try await partner.createHabit("Jog")
            let goal = try await owner.createSharedGoal("Together")
            _ = try await partner.goals.linkHabit(
                .with {
                    $0.goalID = goal.id
                    $0.habitID = theirs.id
                }, options: partner.options)
            if endFirst { try await owner.fixture.deliverPartnershipEnded(partnershipID, owner, partner) }
            try await partner.deleteAccount()
            if !endFirst { try await owner.fixture.deliverPartnershipEnded(partnershipID, owner, partner) }
            try await partner.deleteAccount()
            let personal = try await owner.getGoal(goal.id)
            #expect(!personal.shared && personal.partnerID.isEmpty, "end first: \(endFirst)")
            #expect(personal.links.isEmpty, "end first: \(endFirst)")
        }
    }
}

extension SocialFixture {
    /// Social's PartnershipEnded, delivered to goals by hand (as the relay would, in whatever order a test needs).
    func deliverPartnershipEnded(_ partnershipID: String, _ user: TestUser, _ partner: TestUser) async throws {
        var ended = Habitflow_Events_V1_PartnershipEnded()
        ended.partnershipID = partnershipID
        ended.userID = user.userID
        ended.partnerUserID = partner.userID
        ended.endedAt = Google_Protobuf_Timestamp(date: Date())
        try await deliver(
            ended, aggregate: ("partnership", partnershipID), source: "social", to: [goalsInternalChannel])
    }
}

extension TestUser {
    func createGoal(
        _ title: String, type: Habitflow_Goals_V1_GoalType = .count, target: Double = 20, habits: [String] = [],
        shared: Bool = false, configure: (inout Habitflow_Goals_V1_CreateGoalRequest) -> Void = { _ in }
    ) async throws -> SharedGoal {
        var request = Habitflow_Goals_V1_CreateGoalRequest()
        request.title = title
        request.type = type
        request.target.value = target
        request.horizon = .ongoing
        request.habitIds = habits
        request.shared = shared
        configure(&request)
        return try await goals.createGoal(request, options: options)
    }

    func createSharedGoal(
        _ title: String, type: Habitflow_Goals_V1_GoalType = .count, habits: [String] = [],
        configure: (inout Habitflow_Goals_V1_CreateGoalRequest) -> Void = { _ in }
    ) async throws -> SharedGoal {
        try await createGoal(
            title, type: type, target: type == .rating ? 5 : 20, habits: habits, shared: true, configure: configure)
    }

    func setShared(_ id: String, _ shared: Bool) async throws -> SharedGoal {
        try await goals.updateGoal(
            .with {
                $0.goal.id = id
                $0.goal.shared = shared
                $0.updateMask.paths = ["shared"]
            }, options: options)
    }

    func rename(_ id: String, _ title: String) async throws -> SharedGoal {
        try await goals.updateGoal(
            .with {
                $0.goal.id = id
                $0.goal.title = title
                $0.updateMask.paths = ["title"]
            }, options: options)
    }

    func getGoal(_ id: String) async throws -> SharedGoal {
        try await goals.getGoal(.with { $0.goalID = id }, options: options)
    }

    func listGoals() async throws -> [SharedGoal] {
        try await goals.listGoals(.with { $0.pageSize = 100 }, options: options).goals
    }

    func goalChanges() async throws -> [Habitflow_Goals_V1_Change] {
        try await goals.listChanges(.init(), options: options).changes
    }
}

/// Reads until `done` holds (events travel through social's relay), for at most 10 seconds.
func eventually<Value>(
    _ read: () async throws -> Value, until done: (Value) -> Bool
) async throws -> Value {
    var value = try await read()
    for _ in 0..<100 where !done(value) {
        try await Task.sleep(for: .milliseconds(100))
        value = try await read()
    }
    return value
}
