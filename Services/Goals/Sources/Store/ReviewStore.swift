public import HabitFlowCalendar
public import Foundation
internal import HabitFlowPostgres

extension GoalsStore {
    /// Creates the review unless the user has one with its id: then that review is returned as it is (a retry),
    /// before any rule is checked. A category CategoryDeleted named is refused (habits' answer may lag the event).
    public func createReview(user userID: UUID, _ new: NewReview, now: Date) async throws -> ReviewRecord {
        try await write(user: userID) { transaction, sequence in
            if let existing = try await review(transaction, user: userID, id: new.id) { return existing }
            try await requireLiveCategories(transaction, user: userID, new.ratings)
            try await transaction.execute(
                """
                INSERT INTO reviews (user_id, id, type, review_date, note, created_at, updated_at, change_seq, \
                created_seq) VALUES (\(userID), \(new.id), \(new.type.rawValue), \(new.date), \(new.note), \(now), \
                \(now), \(sequence), \(sequence))
                """)
            try await insertRatings(transaction, user: userID, review: new.id, new.ratings)
            return try await liveReview(transaction, user: userID, id: new.id)
        }
    }

    /// Sets the given fields (last write wins); new ratings replace every rating and are checked like on create.
    public func updateReview(user userID: UUID, id: UUID, changes: ReviewChanges, now: Date) async throws
        -> ReviewRecord
    {
        try await write(user: userID) { transaction, sequence in
            let current = try await liveReview(transaction, user: userID, id: id)
            if let ratings = changes.ratings {
                try await requireLiveCategories(transaction, user: userID, ratings)
                try await transaction.execute(
                    "DELETE FROM review_ratings WHERE user_id = \(userID) AND review_id = \(id)")
                try await insertRatings(transaction, user: userID, review: id, ratings)
            }
            try await transaction.execute(
                """
                UPDATE reviews SET type = \((changes.type ?? current.type).rawValue), \
                review_date = \(changes.date ?? current.date), note = \(changes.note ?? current.note), \
                updated_at = \(now), change_seq = \(sequence) WHERE user_id = \(userID) AND id = \(id)
                """)
            return try await liveReview(transaction, user: userID, id: id)
        }
    }

    /// Deletes the review (a tombstone): its ratings leave the latest figures and the history. Deleting again
    /// succeeds.
    public func deleteReview(user userID: UUID, id: UUID, now: Date) async throws {
        try await write(user: userID) { transaction, sequence in
            guard let current = try await review(transaction, user: userID, id: id) else {
                throw GoalsError.reviewNotFound(id)
            }
            if current.isDeleted { return }
            try await transaction.execute(
                """
                UPDATE reviews SET deleted_at = \(now), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id)
                """)
        }
    }

    /// The user's live reviews, newest first (by date, then creation), after the one at `after`.
    public func reviews(user userID: UUID, after: (date: LocalDate, sequence: Int64)?, limit: Int) async throws
        -> [ReviewRecord]
    {
        let date = after?.date ?? LocalDate(year: 9999, month: 12, day: 31)!
        let sequence = after?.sequence ?? Int64.max
        let rows = try await pool.query(
            """
            SELECT * FROM reviews WHERE user_id = \(userID) AND deleted_at IS NULL \
            AND (review_date, created_seq) < (\(date), \(sequence)) \
            ORDER BY review_date DESC, created_seq DESC LIMIT \(limit)
            """)
        return try await withRatings(pool, user: userID, rows)
    }

    /// Every rating of the user's live reviews, and the categories CategoryDeleted named, in one statement joined to
    /// the user's own row: `nil` when the service does not know the user (then ``userVersion(_:now:)`` creates them,
    /// or refuses a deleted account, and they have neither).
    public func ratingPointsOfKnownUser(_ userID: UUID) async throws -> (points: [RatingPoint], deleted: Set<UUID>)? {
        let rows = try await pool.query(
            """
            SELECT rr.category_id, rr.rating, r.id, r.review_date, r.created_seq, d.deleted FROM users u \
            CROSS JOIN LATERAL (SELECT ARRAY(SELECT category_id FROM deleted_categories \
            WHERE user_id = u.user_id) AS deleted) d \
            LEFT JOIN (reviews r JOIN review_ratings rr ON rr.user_id = r.user_id AND rr.review_id = r.id \
            AND r.deleted_at IS NULL) ON r.user_id = u.user_id \
            WHERE u.user_id = \(userID) ORDER BY r.review_date, r.created_seq
            """)
        guard let first = rows.first else { return nil }
        let deleted = Set(try first.decode(5, as: [UUID].self))
        // The user without a rating: one row, without a review.
        if try first.decode(2, as: UUID?.self) == nil { return ([], deleted) }
        let points = try rows.map {
            RatingPoint(
                categoryID: try $0.decode(0, as: UUID.self), rating: Int(try $0.decode(1, as: Int16.self)),
                reviewID: try $0.decode(2, as: UUID.self), date: try $0.decode(3, as: LocalDate.self),
                reviewSequence: try $0.decode(4, as: Int64.self))
        }
        return (points, deleted)
    }

    /// A review of the user's, deleted ones included; `nil` when the user has none with that id.
    func review(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> ReviewRecord? {
        let rows = try await database.query("SELECT * FROM reviews WHERE user_id = \(userID) AND id = \(id)")
        return try await withRatings(database, user: userID, rows).first
    }

    /// A live review of the user's; deleted and unknown ids are ``GoalsError/reviewNotFound(_:)``.
    func liveReview(_ database: some PostgresQueryable, user userID: UUID, id: UUID) async throws -> ReviewRecord {
        guard let review = try await review(database, user: userID, id: id), !review.isDeleted else {
            throw GoalsError.reviewNotFound(id)
        }
        return review
    }

    /// The reviews of `rows` (of `SELECT * FROM reviews`) with their ratings, in the rows' order.
    func withRatings(_ database: some PostgresQueryable, user userID: UUID, _ rows: PostgresRows) async throws
        -> [ReviewRecord]
    {
        var reviews = try rows.map(ReviewRecord.init(row:))
        guard !reviews.isEmpty else { return [] }
        let ratings = try await database.query(
            """
            SELECT review_id, category_id, rating FROM review_ratings WHERE user_id = \(userID) \
            AND review_id = ANY(\(reviews.map(\.id))::uuid[]) ORDER BY review_id, position
            """)
        var byReview: [UUID: [CategoryRatingValue]] = [:]
        for row in ratings {
            byReview[try row.decode(0, as: UUID.self), default: []].append(
                CategoryRatingValue(
                    categoryID: try row.decode(1, as: UUID.self), rating: Int(try row.decode(2, as: Int16.self))))
        }
        for index in reviews.indices { reviews[index].ratings = byReview[reviews[index].id] ?? [] }
        return reviews
    }

    private func insertRatings(
        _ transaction: PostgresTransaction, user userID: UUID, review reviewID: UUID, _ ratings: [CategoryRatingValue]
    ) async throws {
        for (position, rating) in ratings.enumerated() {
            try await transaction.execute(
                """
                INSERT INTO review_ratings (user_id, review_id, category_id, rating, position) VALUES (\(userID), \
                \(reviewID), \(rating.categoryID), \(Int16(rating.rating)), \(Int16(position)))
                """)
        }
    }

    /// No rated category may be one CategoryDeleted named.
    private func requireLiveCategories(
        _ transaction: PostgresTransaction, user userID: UUID, _ ratings: [CategoryRatingValue]
    ) async throws {
        let deleted = try await transaction.queryRow(
            """
            SELECT category_id FROM deleted_categories WHERE user_id = \(userID) \
            AND category_id = ANY(\(ratings.map(\.categoryID))::uuid[]) LIMIT 1
            """)
        if let deleted { throw GoalsError.categoryNotFound(try deleted.decode(0, as: UUID.self)) }
    }
}

extension ReviewRecord {
    /// A row of `SELECT * FROM reviews`, without its ratings (``GoalsStore/withRatings(_:user:_:)`` adds them).
    init(row: PostgresRow) throws {
        guard let type = ReviewType(rawValue: try row.decode("type")) else {
            throw PostgresError(kind: .decodingFailed, message: "a review row with an unknown type")
        }
        self.init(
            id: try row.decode("id"), type: type, date: try row.decode("review_date"), ratings: [],
            note: try row.decode("note"), createdAt: try row.decode("created_at"),
            updatedAt: try row.decode("updated_at"), deletedAt: try row.decode("deleted_at"),
            changeSequence: try row.decode("change_seq"), createdSequence: try row.decode("created_seq"))
    }
}
