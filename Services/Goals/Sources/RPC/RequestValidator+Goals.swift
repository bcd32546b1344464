internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowGoalsProtos
internal import HabitFlowServiceAPI
internal import HabitFlowCrypto

/// The goals service's own field rules, on top of the shared checks.
extension RequestValidator {
    /// Optional text of at most `maximumLength` characters (Unicode code points), without control characters but
    /// line breaks.
    mutating func text(_ raw: String, field: String, maximumLength: Int) -> String {
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.unicodeScalars.count > maximumLength {
            reject(field, "must be at most \(maximumLength) characters, got \(text.unicodeScalars.count)")
        } else if text.unicodeScalars.contains(where: {
            $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t"
        }) {
            reject(field, "must not contain control characters")
        }
        return text
    }

    /// One emoji (a single character drawn as an emoji), or nothing.
    mutating func icon(_ raw: String, field: String) -> String {
        guard !raw.isEmpty else { return "" }
        guard raw.count == 1, let character = raw.first,
            character.unicodeScalars.contains(where: { $0.properties.isEmojiPresentation })
                || (character.unicodeScalars.first?.properties.isEmoji == true
                    && character.unicodeScalars.contains("\u{FE0F}"))
        else {
            reject(field, "must be one emoji, for example 🏃")
            return ""
        }
        return raw
    }

    mutating func type(_ proto: Habitflow_Goals_V1_GoalType, field: String) -> GoalType {
        guard let type = GoalType(proto) else {
            reject(field, "is required: one of WEEKLY_HABIT, RECURRING_TASK, COUNT, QUANTITY, LEVEL, RATING")
            return .count
        }
        return type
    }

    mutating func horizon(_ proto: Habitflow_Goals_V1_Horizon, field: String) -> Horizon {
        guard let horizon = Horizon(proto) else {
            reject(
                field,
                "is required: one of ONE_WEEK, FOUR_WEEKS, EIGHT_WEEKS, TWELVE_WEEKS, FIVE_YEARS, TEN_YEARS, ONGOING")
            return .ongoing
        }
        return horizon
    }

    /// The target value for a goal of `type` (with its levels or rating scale).
    mutating func targetValue(
        _ value: Double, type: GoalType, levelCount: Int, ratingScale: Int, field: String
    ) -> Double {
        func whole(in range: ClosedRange<Double>, _ what: String) -> Double {
            guard value.isFinite, value == value.rounded(), range.contains(value) else {
                reject(field, "must be \(what), got \(value)")
                return range.lowerBound
            }
            return value
        }
        switch type {
        case .weeklyHabit:
            return whole(in: 1...Double(GoalRules.maximumWeeklyTarget), "a whole number of check-ins a week from 1 to 21")
        case .recurringTask:
            guard value == 0 || value == 1 else {
                reject(field, "must be unset (0) for a recurring task: each week is done or not")
                return 1
            }
            return 1
        case .count:
            return whole(in: 1...GoalRules.maximumCountTarget, "a whole number of check-ins from 1 to 1000000")
        case .quantity:
            guard value.isFinite, value > 0, value <= GoalRules.maximumQuantityTarget else {
                reject(field, "must be more than 0 and at most 1000000000, got \(value)")
                return 1
            }
            return (value * 1_000_000).rounded() / 1_000_000
        case .level:
            return whole(in: 1...Double(max(levelCount, 1)), "the position of one of the goal's levels (1 to \(levelCount))")
        case .rating:
            return whole(in: 1...Double(max(ratingScale, 1)), "a rating from 1 to \(ratingScale)")
        }
    }

    /// A quantity goal's unit.
    mutating func unit(_ raw: String, field: String) -> String {
        name(raw, field: field, maximumLength: GoalRules.maximumUnitLength)
    }

    /// A level goal's levels: 2 to 20 names, lowest first, no repeats (ignoring case).
    mutating func levels(_ raw: [String], field: String) -> [String] {
        guard GoalRules.levelCount.contains(raw.count) else {
            reject(field, "must hold 2 to 20 level names, lowest first, got \(raw.count)")
            return []
        }
        var seen: Set<String> = []
        return raw.enumerated().map { index, level in
            let name = name(level, field: "\(field)[\(index)]", maximumLength: GoalRules.maximumLevelNameLength)
            if !seen.insert(name.lowercased()).inserted { reject("\(field)[\(index)]", "repeats an earlier level") }
            return name
        }
    }

    mutating func ratingScale(_ value: Int32, field: String) -> Int {
        guard GoalRules.ratingScales.contains(Int(value)) else {
            reject(field, "must be 5 or 10, got \(value)")
            return 5
        }
        return Int(value)
    }

    /// Up to `maximum` habit ids, no repeats; none is fine.
    mutating func habitIDs(_ texts: [String], field: String, maximum: Int) -> [UUID] {
        texts.isEmpty ? [] : ids(texts, field: field, maximum: maximum)
    }

    // MARK: Reviews

    mutating func reviewType(_ proto: Habitflow_Goals_V1_ReviewType, field: String) -> ReviewType {
        guard let type = ReviewType(proto) else {
            reject(field, "is required: one of TWELVE_WEEK, ANNUAL")
            return .twelveWeek
        }
        return type
    }

    /// 1..``GoalRules/maximumReviewCategories`` ratings of different categories, each in ``GoalRules/reviewRatings``.
    mutating func ratings(_ raw: [Habitflow_Goals_V1_CategoryRating], field: String) -> [CategoryRatingValue] {
        if raw.isEmpty {
            reject(field, "is required: rate 1 to \(GoalRules.maximumReviewCategories) categories")
        } else if raw.count > GoalRules.maximumReviewCategories {
            reject(field, "rates at most \(GoalRules.maximumReviewCategories) categories, got \(raw.count)")
        }
        var seen: Set<UUID> = []
        return raw.enumerated().map { index, rating in
            let categoryID = id(rating.categoryID, field: "\(field)[\(index)].category_id")
            if categoryID != UUID.min, !seen.insert(categoryID).inserted {
                reject("\(field)[\(index)].category_id", "repeats an earlier category")
            }
            let range = GoalRules.reviewRatings
            if !range.contains(Int(rating.rating)) {
                reject(
                    "\(field)[\(index)].rating",
                    "must be from \(range.lowerBound) to \(range.upperBound), got \(rating.rating)")
            }
            return CategoryRatingValue(categoryID: categoryID, rating: Int(rating.rating))
        }
    }

    // MARK: Pages

    /// Where the previous page of a list ordered by day and sequence (assessments, reviews, tasks) ended: `nil` for
    /// the first page and for a refused token.
    mutating func datedPosition(_ token: String, list: String) -> DatedPosition? {
        guard let fields = pageToken(token, list: list, fieldCount: 2) else { return nil }
        guard let date = PageToken.date(fields[0]), let sequence = Int64(fields[1]) else {
            reject("page_token", "is not a token this list returned")
            return nil
        }
        return DatedPosition(date: date, sequence: sequence)
    }

    // MARK: Calendar messages

    mutating func date(_ date: Habitflow_Goals_V1_LocalDate, field: String) -> LocalDate {
        self.date(year: date.year, month: date.month, day: date.day, field: field)
    }

    /// A date that is not after `today`.
    mutating func pastDate(_ date: Habitflow_Goals_V1_LocalDate, field: String, today: LocalDate) -> LocalDate {
        let local = self.date(date, field: field)
        if local > today { reject(field, "must not be after today (\(today)), got \(local)") }
        return local
    }

    mutating func week(_ week: Habitflow_Goals_V1_IsoWeek, field: String) -> IsoWeek {
        self.week(year: week.year, week: week.week, field: field)
    }

    /// A week that must be set (`nil`: unset).
    mutating func requiredWeek(_ week: Habitflow_Goals_V1_IsoWeek?, field: String) -> IsoWeek {
        guard let week else {
            reject(field, "is required: an ISO week, for example {year: 2026, week: 3}")
            return IsoWeek(containing: LocalDate(daysSinceEpoch: 0))
        }
        return self.week(week, field: field)
    }
}

/// A row's place in a list ordered by a day, then a sequence value: what a page token of such a list holds.
struct DatedPosition {
    var date: LocalDate
    var sequence: Int64

    /// The page token that continues `list` after this row.
    func token(list: String) -> String {
        PageToken.encode(list: list, [String(date.daysSinceEpoch), String(sequence)])
    }
}
