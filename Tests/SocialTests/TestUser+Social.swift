import Foundation
import HabitFlowEvents
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowSocialProtos
import Testing

/// Friends and partners in one call each, through the public API, for the suites that build on them.
extension TestUser {
    /// Sends `other` a friend request by username and has them accept it.
    @discardableResult
    func makeFriends(with other: TestUser) async throws -> Habitflow_Social_V1_Request {
        let sent = try await sendFriendRequest(username: other.username)
        return try await other.social.acceptRequest(.with { $0.requestID = sent.id }, options: other.options)
    }

    /// Makes the two friends (unless they are), then partners: this user asks, `other` accepts.
    @discardableResult
    func makePartners(with other: TestUser) async throws -> Habitflow_Social_V1_Partnership {
        let friends = try await social.listFriends(.with { $0.pageSize = 100 }, options: options)
        if !friends.friends.contains(where: { $0.person.userID == other.userID }) {
            try await makeFriends(with: other)
        }
        let sent = try await social.sendPartnerRequest(.with { $0.userID = other.userID }, options: options)
        _ = try await other.social.acceptRequest(.with { $0.requestID = sent.id }, options: other.options)
        return try await social.getPartner(.init(), options: options)
    }

    func sendPartnerRequest(to friend: TestUser) async throws -> Habitflow_Social_V1_Request {
        try await social.sendPartnerRequest(.with { $0.userID = friend.userID }, options: options)
    }

    func sendFriendRequest(username: String, requestID: String = "") async throws -> Habitflow_Social_V1_Request {
        try await social.sendFriendRequest(
            .with {
                $0.username = username
                $0.requestID = requestID
            }, options: options)
    }

    func sendFriendRequest(email: String, requestID: String = "") async throws -> Habitflow_Social_V1_Request {
        try await social.sendFriendRequest(
            .with {
                $0.email = email
                $0.requestID = requestID
            }, options: options)
    }

    func accept(_ request: Habitflow_Social_V1_Request) async throws -> Habitflow_Social_V1_Request {
        try await social.acceptRequest(.with { $0.requestID = request.id }, options: options)
    }

    func decline(_ request: Habitflow_Social_V1_Request) async throws -> Habitflow_Social_V1_Request {
        try await social.declineRequest(.with { $0.requestID = request.id }, options: options)
    }

    func cancel(_ request: Habitflow_Social_V1_Request) async throws -> Habitflow_Social_V1_Request {
        try await social.cancelRequest(.with { $0.requestID = request.id }, options: options)
    }

    /// The user ids of this user's friends (the first 100: all of them).
    func friendIDs() async throws -> [String] {
        try await social.listFriends(.with { $0.pageSize = 100 }, options: options).friends.map(\.person.userID)
    }

    /// This user's pending requests, as ListRequests shows them.
    func pendingRequests(
        _ direction: Habitflow_Social_V1_Direction = .unspecified, kind: Habitflow_Social_V1_RequestKind = .unspecified
    ) async throws -> [Habitflow_Social_V1_Request] {
        try await social.listRequests(
            .with {
                $0.direction = direction
                $0.kind = kind
                $0.pageSize = 100
            }, options: options
        ).requests
    }

    /// Blocks `other` by id.
    @discardableResult
    func block(_ other: TestUser) async throws -> Habitflow_Social_V1_BlockedUser {
        try await social.blockUser(.with { $0.userID = other.userID }, options: options).blocked
    }

    /// The partnership's id, or nil when the user has none (SocialInternal.GetPartnership, as goals asks).
    func partnershipID() async throws -> String? {
        let answer = try await fixture.socialInternal.getPartnership(.with { $0.userID = userID })
        return answer.found ? answer.partnershipID : nil
    }
}

extension Habitflow_Social_V1_Change {
    var requestValue: Habitflow_Social_V1_Request? {
        if case .request(let request) = resource { return request }
        return nil
    }

    var friendValue: Habitflow_Social_V1_Friend? {
        if case .friend(let friend) = resource { return friend }
        return nil
    }

    var blockedValue: Habitflow_Social_V1_BlockedUser? {
        if case .blocked(let blocked) = resource { return blocked }
        return nil
    }

    var partnershipValue: Habitflow_Social_V1_Partnership? {
        if case .partnership(let partnership) = resource { return partnership }
        return nil
    }
}

/// What social's outbox published, copied as it is appended (the relay deletes outbox rows once delivered): a
/// trigger the tests install once, as the social role, on the throwaway test database.
enum PublishedEvents {
    static let installed = Task { () throws -> Void in
        let pool = try await SocialFixture.shared.value.social.runtime.pool
        try await pool.execute(
            """
            CREATE TABLE IF NOT EXISTS test_published_events (
                aggregate_id text NOT NULL, event_type text NOT NULL, payload bytea NOT NULL,
                copied_at timestamptz NOT NULL DEFAULT clock_timestamp())
            """)
        try await pool.execute(
            """
            CREATE OR REPLACE FUNCTION test_copy_published_event() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO test_published_events (aggregate_id, event_type, payload)
                VALUES (NEW.aggregate_id, NEW.event_type, NEW.payload);
                RETURN NULL;
            END
            $$
            """)
        try await pool.execute("DROP TRIGGER IF EXISTS test_copy_published_event ON outbox")
        try await pool.execute(
            """
            CREATE TRIGGER test_copy_published_event AFTER INSERT ON outbox FOR EACH ROW \
            EXECUTE FUNCTION test_copy_published_event()
            """)
    }

    /// Call before the events to see are published.
    static func install() async throws { try await installed.value }

    /// The partnership events published about `partnershipID`, in order.
    static func partnership(_ partnershipID: String) async throws -> [PartnershipEvent] {
        let pool = try await SocialFixture.shared.value.social.runtime.pool
        return try await pool.query(
            """
            SELECT event_type, payload FROM test_published_events WHERE aggregate_id = \(partnershipID) \
            ORDER BY copied_at
            """
        ).map { row in
            let type = try row.decode(0, as: String.self)
            let payload = try row.decode(1, as: Data.self)
            if type == Habitflow_Events_V1_PartnershipStarted.protoMessageName {
                let event = try Habitflow_Events_V1_PartnershipStarted(serializedBytes: payload)
                return .started(user: event.userID, partner: event.partnerUserID)
            }
            let event = try Habitflow_Events_V1_PartnershipEnded(serializedBytes: payload)
            return .ended(user: event.userID, partner: event.partnerUserID)
        }
    }
}

enum PartnershipEvent: Hashable {
    case started(user: String, partner: String)
    case ended(user: String, partner: String)
}
