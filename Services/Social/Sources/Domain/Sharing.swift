public import Foundation

/// What a user shares with their friends (seed 004 SOC-004..007, SOC-010). Individual habits are never shared.
public struct SharingSettings: Sendable, Hashable {
    /// The weekly score (and habit count) on friends' leaderboards.
    public var shareWeeklyScore: Bool
    /// Shares nothing with anyone while true; the other settings are kept for when it is turned off.
    public var privateMode: Bool
    /// Categories (habits service) whose weekly scores friends see, in the order the user chose.
    public var sharedCategoryIDs: [UUID]
    /// When the user last changed them; `nil` while they never did.
    public var updatedAt: Date?

    public init(shareWeeklyScore: Bool, privateMode: Bool, sharedCategoryIDs: [UUID], updatedAt: Date?) {
        self.shareWeeklyScore = shareWeeklyScore
        self.privateMode = privateMode
        self.sharedCategoryIDs = sharedCategoryIDs
        self.updatedAt = updatedAt
    }

    /// What a user who never changed anything has: the score shared, no category, not private.
    public static let defaults = SharingSettings(
        shareWeeklyScore: true, privateMode: false, sharedCategoryIDs: [], updatedAt: nil)

    /// Whether the user is on their friends' leaderboards: private mode overrides the score setting.
    public var sharesWeeklyScore: Bool { shareWeeklyScore && !privateMode }

    /// The categories a leaderboard line of this user shows: none in private mode (which shares nothing), the chosen
    /// ones otherwise.
    public var visibleCategoryIDs: [UUID] { privateMode ? [] : sharedCategoryIDs }
}

/// A partial update of ``SharingSettings``: `nil` leaves a field as it is (last write wins per field).
public struct SharingChanges: Sendable, Hashable {
    public var shareWeeklyScore: Bool?
    public var privateMode: Bool?
    public var sharedCategoryIDs: [UUID]?

    public init(shareWeeklyScore: Bool? = nil, privateMode: Bool? = nil, sharedCategoryIDs: [UUID]? = nil) {
        self.shareWeeklyScore = shareWeeklyScore
        self.privateMode = privateMode
        self.sharedCategoryIDs = sharedCategoryIDs
    }
}

/// The numbers of the sharing settings.
public enum SharingRules {
    /// Shared categories per user: every category a user can have (DESIGN.md section 3, at most 10).
    public static let maximumSharedCategories = 10
}
