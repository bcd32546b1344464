import Foundation
import HabitFlowGoalsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowServiceAPI
import HabitFlowTestSupport
import Testing

typealias Review = Habitflow_Goals_V1_Review

func rating(_ category: String, _ value: Int32) -> Habitflow_Goals_V1_CategoryRating {
    .with {
        $0.categoryID = category
        $0.rating = value
    }
}

extension TestUser {
    /// The user's live categories by name (new accounts start with habits' default ones).
    func categoryIDs() async throws -> [String: String] {
        let categories = try await habits.listCategories(.init(), options: options).categories
        return Dictionary(uniqueKeysWithValues: categories.map { ($0.name, $0.id) })
    }

    func createReview(
        _ ratings: [Habitflow_Goals_V1_CategoryRating], type: Habitflow_Goals_V1_ReviewType = .twelveWeek,
        on day: Habitflow_Goals_V1_LocalDate? = nil, note: String = "", id: String = ""
    ) async throws -> Review {
        try await goals.createReview(
            .with {
                $0.reviewID = id
                $0.type = type
                if let day { $0.date = day }
                $0.ratings = ratings
                $0.note = note
            }, options: options)
    }

    func reviews() async throws -> [Review] {
        try await goals.listReviews(.init(), options: options).reviews
    }

    func categoryRatings() async throws -> Habitflow_Goals_V1_GetCategoryRatingsResponse {
        try await goals.getCategoryRatings(.init(), options: options)
    }

    func deleteReview(_ review: Review) async throws {
        _ = try await goals.deleteReview(.with { $0.reviewID = review.id }, options: options)
    }
}

@Suite struct ReviewTests {
    @Test func reviewsAreCreatedListedUpdatedAndDeleted() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let ids = try await user.categoryIDs()
        let health = try #require(ids["Health"]), career = try #require(ids["Career"])
        let quarter = try await user.createReview(
            [rating(health, 7), rating(career, 4)], type: .twelveWeek, on: goalsDate(2026, 1, 10), note: "Q4")
        #expect(quarter.type == .twelveWeek && quarter.date == goalsDate(2026, 1, 10))
        #expect(quarter.nextReviewDate == goalsDate(2026, 4, 4))
        #expect(quarter.ratings == [rating(health, 7), rating(career, 4)])
        #expect(quarter.note == "Q4" && !quarter.deleted)
        // Today by default; an annual review is next due a year later (29 February → 28 February).
        let annual = try await user.createReview([rating(health, 8)], type: .annual)
        #expect(annual.date == goalsDate(2026, 1, 14) && annual.nextReviewDate == goalsDate(2027, 1, 14))
        let leap = try await user.createReview([rating(career, 2)], type: .annual, on: goalsDate(2024, 2, 29))
        #expect(leap.nextReviewDate == goalsDate(2025, 2, 28))
        // Newest first.
        #expect(try await user.reviews().map(\.id) == [annual.id, quarter.id, leap.id])
        let updated = try await user.goals.updateReview(
            .with {
                $0.review.id = quarter.id
                $0.review.type = .annual
                $0.review.ratings = [rating(career, 9)]
                $0.review.note = "ignored: not in the mask"
                $0.updateMask.paths = ["type", "ratings"]
            }, options: user.options)
        #expect(updated.type == .annual && updated.nextReviewDate == goalsDate(2027, 1, 10))
        #expect(updated.ratings == [rating(career, 9)] && updated.note == "Q4")
        try await user.deleteReview(leap)
        try await user.deleteReview(leap)  // deleting again succeeds
        #expect(try await user.reviews().map(\.id) == [annual.id, quarter.id])
        await expectError(.notFound) {
            _ = try await user.goals.updateReview(
                .with {
                    $0.review.id = leap.id
                    $0.review.note = "too late"
                    $0.updateMask.paths = ["note"]
                }, options: user.options)
        }
    }

    @Test func theLatestRatingOfACategoryComesFromTheLatestReviewThatRatedIt() async throws {
        let user = try await TestUser()
        try user.setNow("2026-06-14T12:00:00Z")
        let ids = try await user.categoryIDs()
        let health = try #require(ids["Health"]), career = try #require(ids["Career"])
        let older = try await user.createReview([rating(health, 3), rating(career, 5)], on: goalsDate(2026, 1, 5))
        // Created later but dated earlier: it does not win.
        _ = try await user.createReview([rating(health, 1), rating(career, 1)], on: goalsDate(2025, 12, 1))
        let newer = try await user.createReview([rating(health, 8)], on: goalsDate(2026, 4, 1))
        var figures = try await user.categoryRatings()
        var latest = Dictionary(uniqueKeysWithValues: figures.latest.map { ($0.categoryID, $0) })
        #expect(latest[health]?.rating == 8 && latest[health]?.reviewID == newer.id)
        #expect(latest[health]?.date == goalsDate(2026, 4, 1) && latest[health]?.categoryName == "Health")
        #expect(latest[career]?.rating == 5 && latest[career]?.reviewID == older.id)
        #expect(figures.latest.count == 2)
        let history = Dictionary(uniqueKeysWithValues: figures.history.map { ($0.categoryID, $0) })
        #expect(history[health]?.points.map(\.rating) == [1, 3, 8])
        #expect(history[career]?.points.map(\.date) == [goalsDate(2025, 12, 1), goalsDate(2026, 1, 5)])
        // Deleting the latest review falls back to the one before.
        try await user.deleteReview(newer)
        figures = try await user.categoryRatings()
        latest = Dictionary(uniqueKeysWithValues: figures.latest.map { ($0.categoryID, $0) })
        #expect(latest[health]?.rating == 3 && latest[health]?.reviewID == older.id)
        #expect(figures.history.first { $0.categoryID == health }?.points.map(\.rating) == [1, 3])
    }

    @Test func aDeletedCategoryLeavesTheLatestRatingsAndStaysInHistory() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let ids = try await user.categoryIDs()
        let health = try #require(ids["Health"]), career = try #require(ids["Career"])
        let review = try await user.createReview([rating(health, 6), rating(career, 7)], on: goalsDate(2026, 1, 10))
        let inHealth = try await user.createGoal("Sleep", type: .count, target: 5) { $0.categoryID = health }
        #expect(try await user.categoryRatings().latest.map(\.categoryID).sorted() == [health, career].sorted())
        _ = try await user.habits.deleteCategory(.with { $0.categoryID = health }, options: user.options)
        // CategoryDeleted reaches goals through habits' outbox (the goal in it becomes Uncategorized).
        #expect(try await eventually { try await user.goal(inHealth).categoryID == "" })
        #expect(try await user.categoryRatings().latest.map(\.categoryID) == [career])
        let figures = try await user.categoryRatings()
        let deleted = try #require(figures.history.first { $0.categoryID == health })
        #expect(deleted.categoryDeleted && deleted.categoryName == "")
        #expect(deleted.points.map(\.rating) == [6] && deleted.points.first?.reviewID == review.id)
        #expect(figures.history.last?.categoryID == health)  // deleted categories after live ones
        // The review keeps the rating; a new review cannot rate the deleted category.
        #expect(try await user.reviews().first?.ratings == [rating(health, 6), rating(career, 7)])
        await expectError(.notFound) { _ = try await user.createReview([rating(health, 5)]) }
    }

    @Test func badReviewInputNamesTheFields() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let health = try #require(try await user.categoryIDs()["Health"])
        let error = await expectError(.invalidArgument) {
            _ = try await user.goals.createReview(
                .with {
                    $0.reviewID = "nope"
                    $0.ratings = [rating(health, 11), rating("bad", 5), rating(health, 0)]
                    $0.note = String(repeating: "x", count: 501)
                }, options: user.options)
        }
        #expect(
            Set(error?.fieldViolations.map(\.field) ?? []) == [
                "review_id", "type", "ratings[0].rating", "ratings[1].category_id", "ratings[2].category_id",
                "ratings[2].rating", "note",
            ])
        await expectError(.invalidArgument, field: "ratings") { _ = try await user.createReview([]) }
        await expectError(.invalidArgument, field: "ratings") {
            _ = try await user.createReview((1...11).map { _ in rating(UUID().uuidString.lowercased(), 5) })
        }
        await expectError(.invalidArgument, field: "date") {
            _ = try await user.createReview([rating(health, 5)], on: goalsDate(2026, 1, 15))
        }
        // An unknown category (or another user's) is NOT_FOUND, named.
        let unknown = UUID().uuidString.lowercased()
        let missing = await expectError(.notFound) { _ = try await user.createReview([rating(unknown, 5)]) }
        #expect(missing?.message.contains(unknown) == true)
        let review = try await user.createReview([rating(health, 5)])
        await expectError(.invalidArgument, field: "update_mask.paths[0]") {
            _ = try await user.goals.updateReview(
                .with {
                    $0.review.id = review.id
                    $0.updateMask.paths = ["next_review_date"]
                }, options: user.options)
        }
        await expectError(.invalidArgument, field: "review.ratings[0].rating") {
            _ = try await user.goals.updateReview(
                .with {
                    $0.review.id = review.id
                    $0.review.ratings = [rating(health, 11)]
                    $0.updateMask.paths = ["ratings"]
                }, options: user.options)
        }
        await expectError(.notFound) {
            _ = try await user.goals.updateReview(
                .with {
                    $0.review.id = review.id
                    $0.review.ratings = [rating(unknown, 4)]
                    $0.updateMask.paths = ["ratings"]
                }, options: user.options)
        }
    }

    /// The requests fuzz target's reproducer: a page token made by hand (its checksum is no secret) holding a day
    /// number near `Int.max`, which trapped in `LocalDate(daysSinceEpoch:)` and took the service down.
    @Test func aHandMadePageTokenWithAnImpossibleDateIsInvalidArgument() async throws {
        let user = try await TestUser()
        for days in ["9223372036854775807", "-9223372036854775808", "2932897", "-719163"] {
            await expectError(.invalidArgument, field: "page_token") {
                _ = try await user.goals.listReviews(
                    .with { $0.pageToken = PageToken.encode(list: "reviews", [days, "0"]) }, options: user.options)
            }
        }
        #expect(try await user.reviews().isEmpty)
    }

    @Test func aRepeatedCreateReturnsTheFirstReview() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let ids = try await user.categoryIDs()
        let health = try #require(ids["Health"]), career = try #require(ids["Career"])
        let id = UUID().uuidString.lowercased()
        let first = try await user.createReview([rating(health, 4)], type: .annual, id: id)
        let again = try await user.createReview([rating(career, 9)], type: .twelveWeek, id: id)
        #expect(first.id == id && again == first)
        #expect(try await user.reviews().count == 1)
    }

    @Test func anotherUsersReviewIsNotFound() async throws {
        let owner = try await TestUser()
        let stranger = try await TestUser()
        let health = try #require(try await owner.categoryIDs()["Health"])
        let review = try await owner.createReview([rating(health, 5)])
        await expectError(.notFound) { try await stranger.deleteReview(review) }
        await expectError(.notFound) {
            _ = try await stranger.goals.updateReview(
                .with {
                    $0.review.id = review.id
                    $0.review.note = "mine now"
                    $0.updateMask.paths = ["note"]
                }, options: stranger.options)
        }
        // Rating the owner's category is NOT_FOUND for the stranger too; the same id creates nothing of theirs.
        await expectError(.notFound) { _ = try await stranger.createReview([rating(health, 5)]) }
        #expect(try await stranger.reviews().isEmpty)
        #expect(try await stranger.categoryRatings().latest.isEmpty)
        #expect(try await owner.reviews().map(\.id) == [review.id])
    }

    @Test func reviewsListInPagesAndAreInTheChangeFeedAndTheExport() async throws {
        let user = try await TestUser()
        try user.setNow("2026-01-14T12:00:00Z")
        let health = try #require(try await user.categoryIDs()["Health"])
        var created: [Review] = []
        for day in Int32(1)...3 { created.append(try await user.createReview([rating(health, day)], on: goalsDate(2026, 1, day))) }
        var seen: [String] = []
        var token = ""
        repeat {
            let page = try await user.goals.listReviews(
                .with {
                    $0.pageSize = 2
                    $0.pageToken = token
                }, options: user.options)
            seen += page.reviews.map(\.id)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(seen == created.reversed().map(\.id))
        let first = try await user.goals.listChanges(.init(), options: user.options)
        #expect(first.changes.map(\.review.id) == created.map(\.id))
        #expect(first.changes.first?.review.ratings == [rating(health, 1)])
        try await user.deleteReview(created[1])
        let next = try await user.goals.listChanges(.with { $0.cursor = first.nextCursor }, options: user.options)
        #expect(next.changes.map(\.review.id) == [created[1].id])
        #expect(next.changes.map(\.deleted) == [true])
        let exported = try await user.fixture.goalsInternal.exportUser(.with { $0.userID = user.userID })
        #expect(exported.reviews.map(\.id) == created.map(\.id))
        #expect(exported.reviews.map(\.deleted) == [false, true, false])
        // Removing the account removes its reviews and their ratings (the cascade through review_ratings).
        #expect(try await user.fixture.goalsInternal.purgeUser(.with { $0.userID = user.userID }).existed)
        await expectError(.failedPrecondition) { _ = try await user.reviews() }
        await expectError(.failedPrecondition) { _ = try await user.categoryRatings() }
    }

    @Test func theOverviewIsListGoalsFirstPageWithTheLatestRatings() async throws {
        let user = try await TestUser()
        func overview(_ statuses: [Habitflow_Goals_V1_GoalStatus] = [], pageSize: Int32 = 0) async throws
            -> Habitflow_Goals_V1_GoalsOverview
        {
            try await user.goals.getGoalsOverview(
                .with {
                    $0.statuses = statuses
                    $0.pageSize = pageSize
                }, options: user.options)
        }
        // A user goals has not seen: no goals, no ratings, and known afterwards.
        #expect(try await overview() == Habitflow_Goals_V1_GoalsOverview())

        let ids = try await user.categoryIDs()
        let health = try #require(ids["Health"])
        // The first overview found no rating; a review since is seen at once (it takes goals' next version).
        _ = try await user.createReview([rating(health, 7)])
        #expect(try await overview().latestCategoryRatings.map(\.rating) == [7])
        var created: [Goal] = []
        for index in 1...3 { created.append(try await user.createGoal("Goal \(index)", type: .count, target: 5)) }
        _ = try await user.goals.pauseGoal(.with { $0.goalID = created[2].id }, options: user.options)

        let all = try await overview()
        #expect(all.goals == (try await user.list()))
        #expect(all.goals.map(\.id) == created.map(\.id))
        #expect(all.nextPageToken.isEmpty)
        #expect(all.latestCategoryRatings == (try await user.categoryRatings()).latest)
        #expect(all.latestCategoryRatings.map(\.rating) == [7])
        // Served again from goals' cached list (its wire form), the answer is the same.
        #expect(try await overview() == all)
        #expect(try await overview([.paused]).goals.map(\.id) == [created[2].id])

        // A page: its token continues with ListGoals.
        let first = try await overview(pageSize: 2)
        #expect(first.goals.map(\.id) == created.prefix(2).map(\.id))
        let rest = try await user.goals.listGoals(.with {
            $0.pageSize = 2
            $0.pageToken = first.nextPageToken
        }, options: user.options)
        #expect(rest.goals.map(\.id) == [created[2].id] && rest.nextPageToken.isEmpty)

        await expectError(.invalidArgument, field: "statuses[0]") { _ = try await overview([.unspecified]) }
        await expectError(.invalidArgument, field: "page_size") { _ = try await overview(pageSize: -1) }
    }

    /// Most accounts have no goals: their list and overview (every dashboard asks) are answered without a call to
    /// habits, which could change nothing in them. A goals replica whose habits is unreachable still answers them;
    /// once the user has a goal it asks habits again (UNAVAILABLE here), never the empty answer it kept.
    @Test func anAccountWithoutGoalsIsAnsweredWithoutHabits() async throws {
        let user = try await TestUser()
        let cutOff = try await GoalsFixture.startGoals(port: 0, habitsPort: 1, clock: user.fixture.clocks.clock)
        defer { Task { await cutOff.shutdown() } }
        let goals = GoalsClient(transport: try GoalsFixture.channel(to: cutOff.port, signedAs: "gateway"))
        let overview = Habitflow_Goals_V1_GetGoalsOverviewRequest.with { $0.statuses = [.inProgress, .notStarted] }
        for _ in 1...2 {
            #expect(try await goals.getGoalsOverview(overview, options: user.options) == .init())
            #expect(try await goals.listGoals(.init(), options: user.options).goals.isEmpty)
        }
        let goal = try await user.createGoal("Read 10 books", type: .count, target: 10)
        await expectError(.unavailable) { _ = try await goals.getGoalsOverview(overview, options: user.options) }
        await expectError(.unavailable) { _ = try await goals.listGoals(.init(), options: user.options) }
        #expect(try await user.list().map(\.id) == [goal.id])
    }

    @Test func aUserGoalsHasNotSeenHasNoRatingsAndIsKnownAfterwards() async throws {
        let user = try await TestUser()
        let pool = user.fixture.goals.runtime.pool
        let known: PostgresQuery = "SELECT count(*) FROM users WHERE user_id = \(user.id)"
        #expect(try await pool.queryRow(known)?.decode(0, as: Int64.self) == 0)
        let figures = try await user.categoryRatings()
        #expect(figures.latest.isEmpty && figures.history.isEmpty)
        #expect(try await pool.queryRow(known)?.decode(0, as: Int64.self) == 1)
        #expect(try await user.categoryRatings() == figures)
    }
}
