public import Foundation
public import HabitFlowCalendar

extension GoalRules {
    /// A review rates each category from 1 to 10.
    public static let reviewRatings = 1...10
    /// A review rates at most this many categories (at least one).
    public static let maximumReviewCategories = 10
}

/// A review's kind (DESIGN.md section 3a "Reviews"); it sets the next review date.
public enum ReviewType: String, Sendable, Hashable, CaseIterable {
    case twelveWeek = "twelve_week"
    case annual

    /// The day of the next review after one on `date`: 12 weeks later, or one year later (29 February gives
    /// 28 February).
    public func nextReviewDate(after date: LocalDate) -> LocalDate {
        switch self {
        case .twelveWeek: return date.adding(days: 12 * 7)
        case .annual:
            return LocalDate(year: date.year + 1, month: date.month, day: date.day)
                ?? LocalDate(year: date.year + 1, month: date.month, day: 28)!
        }
    }
}

/// One category's rating in a review.
public struct CategoryRatingValue: Sendable, Hashable {
    public var categoryID: UUID
    public var rating: Int

    public init(categoryID: UUID, rating: Int) {
        self.categoryID = categoryID
        self.rating = rating
    }
}

/// A review as stored: its ratings in the order the client gave them.
public struct ReviewRecord: Sendable, Hashable {
    public var id: UUID
    public var type: ReviewType
    public var date: LocalDate
    public var ratings: [CategoryRatingValue]
    public var note: String
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64
    public var createdSequence: Int64

    public init(
        id: UUID, type: ReviewType, date: LocalDate, ratings: [CategoryRatingValue], note: String, createdAt: Date,
        updatedAt: Date, deletedAt: Date?, changeSequence: Int64, createdSequence: Int64
    ) {
        self.id = id
        self.type = type
        self.date = date
        self.ratings = ratings
        self.note = note
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
        self.changeSequence = changeSequence
        self.createdSequence = createdSequence
    }

    public var isDeleted: Bool { deletedAt != nil }
    public var nextReviewDate: LocalDate { type.nextReviewDate(after: date) }
}

/// A review to create, validated by the RPC layer.
public struct NewReview: Sendable, Hashable {
    public var id: UUID
    public var type: ReviewType
    public var date: LocalDate
    public var ratings: [CategoryRatingValue]
    public var note: String

    public init(id: UUID, type: ReviewType, date: LocalDate, ratings: [CategoryRatingValue], note: String) {
        self.id = id
        self.type = type
        self.date = date
        self.ratings = ratings
        self.note = note
    }
}

/// The fields an update of a review sets; `nil` leaves a field as it is. `ratings` replaces every rating.
public struct ReviewChanges: Sendable, Hashable {
    public var type: ReviewType?
    public var date: LocalDate?
    public var ratings: [CategoryRatingValue]?
    public var note: String?

    public init() {}
}

/// One rating of a live review, as the category ratings derive from.
public struct RatingPoint: Sendable, Hashable {
    public var categoryID: UUID
    public var rating: Int
    public var reviewID: UUID
    public var date: LocalDate
    /// The review's creation order (ties of one day).
    public var reviewSequence: Int64

    public init(categoryID: UUID, rating: Int, reviewID: UUID, date: LocalDate, reviewSequence: Int64) {
        self.categoryID = categoryID
        self.rating = rating
        self.reviewID = reviewID
        self.date = date
        self.reviewSequence = reviewSequence
    }
}

/// The latest rating per live category and every category's history, derived from the ratings of live reviews.
public struct CategoryRatings: Sendable, Hashable {
    public struct Latest: Sendable, Hashable {
        public var category: CategoryInfo
        public var point: RatingPoint
    }

    public struct History: Sendable, Hashable {
        public var categoryID: UUID
        /// `nil`: the category is deleted (not among habits' live categories, or CategoryDeleted arrived).
        public var category: CategoryInfo?
        /// Oldest first.
        public var points: [RatingPoint]
    }

    /// Live categories with a rating, in the user's category order.
    public var latest: [Latest]
    /// Live categories in the user's order, then deleted ones (by their first rating).
    public var history: [History]

    /// `points` in any order; `live` are habits' live categories; `deleted` the ones CategoryDeleted named (a
    /// category in both is deleted: the event may arrive before habits' answer changes).
    public init(points: [RatingPoint], live: [CategoryInfo], deleted: Set<UUID>) {
        let ordered = points.sorted { ($0.date, $0.reviewSequence) < ($1.date, $1.reviewSequence) }
        var byCategory: [UUID: [RatingPoint]] = [:]
        var firstSeen: [UUID] = []
        for point in ordered {
            if byCategory[point.categoryID] == nil { firstSeen.append(point.categoryID) }
            byCategory[point.categoryID, default: []].append(point)
        }
        let liveCategories = live.filter { !deleted.contains($0.id) }.sorted { $0.position < $1.position }
        let liveIDs = Set(liveCategories.map(\.id))
        latest = liveCategories.compactMap { category in
            byCategory[category.id]?.last.map { Latest(category: category, point: $0) }
        }
        history =
            liveCategories.compactMap { category in
                byCategory[category.id].map { History(categoryID: category.id, category: category, points: $0) }
            }
            + firstSeen.filter { !liveIDs.contains($0) }.map {
                History(categoryID: $0, category: nil, points: byCategory[$0] ?? [])
            }
    }
}
