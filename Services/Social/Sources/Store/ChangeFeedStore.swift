public import Foundation
public import HabitFlowServiceAPI
internal import HabitFlowPostgres

/// What the feed pages through, in the order one write's rows are listed.
public enum FeedKind: Int, ChangeKind {
    case start = 0, friend = 1, request = 2, block = 3, partnership = 4, settings = 5
}

public typealias ChangeCursor = HabitFlowServiceAPI.ChangeCursor<FeedKind>

/// One changed resource in the user's latest view of it (a tombstone when removed or ended).
public enum ChangedResource: Sendable, Hashable {
    case friend(FriendRecord)
    /// `sequence`: the value stamped on the user's side of the request.
    case request(RequestRecord, sequence: Int64)
    case block(BlockRecord)
    case partnership(PartnershipRecord)
    case settings(Settings)

    /// The user's row of `sharing_settings` (the leaderboard's table), as the feed carries it.
    public struct Settings: Sendable, Hashable {
        public var userID: UUID
        public var shareWeeklyScore: Bool
        public var privateMode: Bool
        public var sharedCategoryIDs: [UUID]
        public var updatedAt: Date?
        public var changeSequence: Int64
    }

    public var cursor: ChangeCursor {
        switch self {
        case .friend(let friend): ChangeCursor(sequence: friend.changeSequence, kind: .friend, id: friend.person.id)
        case .request(let request, let sequence): ChangeCursor(sequence: sequence, kind: .request, id: request.id)
        case .block(let block): ChangeCursor(sequence: block.changeSequence, kind: .block, id: block.person.id)
        case .partnership(let partnership):
            ChangeCursor(sequence: partnership.changeSequence, kind: .partnership, id: partnership.id)
        case .settings(let settings):
            ChangeCursor(sequence: settings.changeSequence, kind: .settings, id: settings.userID)
        }
    }
}

extension ChangedResource.Settings {
    /// A row of `sharing_settings`.
    init(row: PostgresRow) throws {
        self.init(
            userID: try row.decode("user_id"), shareWeeklyScore: try row.decode("share_weekly_score"),
            privateMode: try row.decode("private_mode"), sharedCategoryIDs: try row.decode("shared_category_ids"),
            updatedAt: try row.decode("updated_at"), changeSequence: try row.decode("change_seq"))
    }

    /// What a user without a row shares: the weekly score, no categories, not private.
    static func defaults(for userID: UUID) -> Self {
        Self(
            userID: userID, shareWeeklyScore: true, privateMode: false, sharedCategoryIDs: [], updatedAt: nil,
            changeSequence: 0)
    }
}

extension SocialStore {
    /// Up to `limit` resources changed after `cursor`, in feed order, and whether more follow. Requests come from
    /// both sides (each with that side's sequence value); one hidden from the user by a block never appears.
    public func changes(user userID: UUID, after cursor: ChangeCursor, limit: Int) async throws
        -> (changes: [ChangedResource], hasMore: Bool)
    {
        let fetch = limit + 1
        let friend = cursor.bound(for: .friend)
        let request = cursor.bound(for: .request)
        let block = cursor.bound(for: .block)
        let partnership = cursor.bound(for: .partnership)
        let settings = cursor.bound(for: .settings)
        let friends = try await pool.query(
            """
            SELECT * FROM friend_details WHERE user_id = \(userID) AND change_seq >= \(friend.sequence) \
            AND (change_seq, friend_id) > (\(friend.sequence), \(friend.id)) ORDER BY change_seq, friend_id \
            LIMIT \(fetch)
            """
        ).map { ChangedResource.friend(try FriendRecord(row: $0)) }
        let requests = try await pool.query(
            """
            SELECT * FROM (\
            SELECT d.*, d.sender_seq AS feed_seq FROM request_details d WHERE d.sender_id = \(userID) \
            UNION ALL \
            SELECT d.*, d.recipient_seq AS feed_seq FROM request_details d WHERE d.recipient_id = \(userID) \
            AND NOT d.hidden AND d.recipient_seq IS NOT NULL) r \
            WHERE feed_seq >= \(request.sequence) AND (feed_seq, id) > (\(request.sequence), \(request.id)) \
            ORDER BY feed_seq, id LIMIT \(fetch)
            """
        ).map { ChangedResource.request(try RequestRecord(row: $0), sequence: try $0.decode("feed_seq")) }
        let blocks = try await pool.query(
            """
            SELECT * FROM blocks WHERE user_id = \(userID) AND change_seq >= \(block.sequence) \
            AND (change_seq, blocked_id) > (\(block.sequence), \(block.id)) ORDER BY change_seq, blocked_id \
            LIMIT \(fetch)
            """
        ).map { ChangedResource.block(try BlockRecord(row: $0)) }
        let partnerships = try await pool.query(
            """
            SELECT * FROM partner_details WHERE user_id = \(userID) AND change_seq >= \(partnership.sequence) \
            AND (change_seq, partnership_id) > (\(partnership.sequence), \(partnership.id)) \
            ORDER BY change_seq, partnership_id LIMIT \(fetch)
            """
        ).map { ChangedResource.partnership(try PartnershipRecord(row: $0)) }
        let settingsRows = try await pool.query(
            """
            SELECT * FROM sharing_settings WHERE user_id = \(userID) \
            AND (change_seq, user_id) > (\(settings.sequence), \(settings.id))
            """
        ).map { ChangedResource.settings(try ChangedResource.Settings(row: $0)) }
        let merged = (friends + requests + blocks + partnerships + settingsRows).sorted { $0.cursor < $1.cursor }
        return (Array(merged.prefix(limit)), merged.count > limit)
    }

    /// Everything of a user's for the data export: friends, the requests they sent or received that are not
    /// canceled (never one hidden from them), the users they block, their partnership and their settings.
    func export(user userID: UUID) async throws -> (
        friends: [FriendRecord], requests: [RequestRecord], blocks: [BlockRecord], partnership: PartnershipRecord?,
        settings: ChangedResource.Settings
    ) {
        let friends = try await pool.query(
            """
            SELECT * FROM friend_details WHERE user_id = \(userID) AND deleted_at IS NULL \
            ORDER BY lower(display_name), friend_id
            """
        ).map(FriendRecord.init(row:))
        let requests = try await pool.query(
            """
            SELECT * FROM request_details WHERE state <> 'canceled' \
            AND (sender_id = \(userID) OR (recipient_id = \(userID) AND NOT hidden)) ORDER BY created_at, id
            """
        ).map(RequestRecord.init(row:))
        let blocks = try await pool.query(
            "SELECT * FROM blocks WHERE user_id = \(userID) AND deleted_at IS NULL ORDER BY created_at, blocked_id"
        ).map(BlockRecord.init(row:))
        let settings = try await pool.queryRow("SELECT * FROM sharing_settings WHERE user_id = \(userID)")
            .map(ChangedResource.Settings.init(row:))
        return (
            friends, requests, blocks, try await currentPartnership(pool, of: userID),
            settings ?? .defaults(for: userID)
        )
    }
}
