internal import HabitFlowInternalCredential
internal import HabitFlowServiceAPI
internal import HabitFlowCalendar
internal import Foundation
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// Reviews and category ratings (DESIGN.md section 3a "Reviews"). Rated categories are checked against habits' live
/// categories (one LookupHabits call); the latest ratings are derived at read from the live reviews, habits' live
/// categories (their names and order) and the categories CategoryDeleted named.
extension GoalsServiceHandler {
    static let updatableReviewPaths = ["type", "date", "ratings", "note"]

    /// Every rated category must be one of the user's live categories in habits.
    private func requireCategories(_ ratings: [CategoryRatingValue], user userID: UUID, context: ServerContext)
        async throws
    {
        let found = try await reader.habits.lookup(
            user: userID, habits: [], options: CallOptions().propagating(from: context))
        let live = Set(found.categories.map(\.id))
        if let missing = ratings.first(where: { !live.contains($0.categoryID) }) {
            throw GoalsError.categoryNotFound(missing.categoryID)
        }
    }

    func createReview(
        request: Habitflow_Goals_V1_CreateReviewRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Review {
        var validator = RequestValidator()
        let id = validator.clientID(request.reviewID, field: "review_id")
        let type = validator.reviewType(request.type, field: "type")
        let ratings = validator.ratings(request.ratings, field: "ratings")
        let note = validator.text(request.note, field: "note", maximumLength: GoalRules.maximumNoteLength)
        try validator.check()
        let user = try await caller()
        let date = request.hasDate ? validator.pastDate(request.date, field: "date", today: user.today) : user.today
        try validator.check()
        if let id, let existing = try await store.review(store.pool, user: user.id, id: id) { return existing.proto }
        try await requireCategories(ratings, user: user.id, context: context)
        return try await store.createReview(
            user: user.id, NewReview(id: id ?? UUID.random(), type: type, date: date, ratings: ratings, note: note),
            now: clock.now
        ).proto
    }

    func updateReview(
        request: Habitflow_Goals_V1_UpdateReviewRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_Review {
        var validator = RequestValidator()
        let id = validator.id(request.review.id, field: "review.id")
        let paths = request.updateMask.paths
        let updatable = Self.updatableReviewPaths.joined(separator: ", ")
        if paths.isEmpty { validator.reject("update_mask", "is required: name the fields to change (\(updatable))") }
        for (index, path) in paths.enumerated() where !Self.updatableReviewPaths.contains(path) {
            validator.reject(
                "update_mask.paths[\(index)]",
                path == "next_review_date"
                    ? "next_review_date is derived from type and date"
                    : "\(path) is not a field UpdateReview changes (\(updatable))")
        }
        try validator.check()
        let user = try await caller()
        let review = request.review
        var changes = ReviewChanges()
        for path in Set(paths) {
            switch path {
            case "type": changes.type = validator.reviewType(review.type, field: "review.type")
            case "date":
                if review.hasDate {
                    changes.date = validator.pastDate(review.date, field: "review.date", today: user.today)
                } else {
                    validator.reject("review.date", "is required: the review's day")
                }
            case "ratings": changes.ratings = validator.ratings(review.ratings, field: "review.ratings")
            case "note":
                changes.note = validator.text(review.note, field: "review.note", maximumLength: GoalRules.maximumNoteLength)
            default: break
            }
        }
        try validator.check()
        if let ratings = changes.ratings {
            _ = try await store.liveReview(store.pool, user: user.id, id: id)
            try await requireCategories(ratings, user: user.id, context: context)
        }
        return try await store.updateReview(user: user.id, id: id, changes: changes, now: clock.now).proto
    }

    func deleteReview(
        request: Habitflow_Goals_V1_DeleteReviewRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_DeleteReviewResponse {
        var validator = RequestValidator()
        let id = validator.id(request.reviewID, field: "review_id")
        try validator.check()
        let user = try await caller()
        try await store.deleteReview(user: user.id, id: id, now: clock.now)
        return Habitflow_Goals_V1_DeleteReviewResponse()
    }

    func listReviews(
        request: Habitflow_Goals_V1_ListReviewsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_ListReviewsResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.reviewPageSizes)
        let listName = "reviews"
        let after = validator.datedPosition(request.pageToken, list: listName)
            .map { (date: $0.date, sequence: $0.sequence) }
        try validator.check()
        let user = try await caller()
        let reviews = try await store.reviews(user: user.id, after: after, limit: pageSize + 1)
        return .with {
            let page = reviews.prefix(pageSize)
            $0.reviews = page.map(\.proto)
            if reviews.count > pageSize, let last = page.last {
                $0.nextPageToken = DatedPosition(date: last.date, sequence: last.createdSequence).token(list: listName)
            }
        }
    }

    func getCategoryRatings(
        request: Habitflow_Goals_V1_GetCategoryRatingsRequest, context: ServerContext
    ) async throws -> Habitflow_Goals_V1_GetCategoryRatingsResponse {
        try await categoryRatings(of: try CallerIdentity.requireUser(), context: context).proto
    }

    /// The user's ratings by category.
    func categoryRatings(of userID: UUID, context: ServerContext) async throws -> CategoryRatings {
        // One statement for a user the service knows; a new account is prepared (one without ratings), a deleted one
        // refused.
        guard let stored = try await store.ratingPointsOfKnownUser(userID) else {
            _ = try await caller()
            return CategoryRatings(points: [], live: [], deleted: [])
        }
        let live =
            stored.points.isEmpty
            ? []
            : try await reader.habits.lookup(
                user: userID, habits: [], options: CallOptions().propagating(from: context)
            ).categories
        return CategoryRatings(points: stored.points, live: live, deleted: stored.deleted)
    }
}
