import Foundation
import HabitFlowEvents
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowSocialProtos
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

/// Auth's account events (names, deletion), the internal export and purge.
@Suite struct AccountEventsTests {
    @Test func aDeletedAccountLeavesItsFriendsAndPartner() async throws {
        try await PublishedEvents.install()
        let sam = try await TestUser()
        let alex = try await TestUser()
        let chris = try await TestUser()
        let partnership = try await sam.makePartners(with: alex)
        try await sam.makeFriends(with: chris)
        let pending = try await sam.sendFriendRequest(email: "x@\(UUID().uuidString).com")
        #expect(pending.state == .pending)
        try await sam.deleteAccount()

        #expect(try await alex.friendIDs().isEmpty)
        #expect(try await chris.friendIDs().isEmpty)
        await expectError(.notFound) { _ = try await alex.social.getPartner(.init(), options: alex.options) }
        #expect(try await alex.partnershipID() == nil)
        #expect(
            try await PublishedEvents.partnership(partnership.id).last
                == .ended(user: sam.userID, partner: alex.userID))
        // Nothing names sam any more on the friends' side, in the feed either.
        let alexFeed = try await alex.social.listChanges(.init(), options: alex.options).changes
        #expect(alexFeed.allSatisfy { $0.friendValue == nil && $0.partnershipValue == nil })
        #expect(alexFeed.compactMap(\.requestValue).isEmpty)
        // Sam's calls are refused, and a request to sam's username looks like one to nobody.
        let refused = await expectError(.failedPrecondition) {
            _ = try await sam.social.listFriends(.init(), options: sam.options)
        }
        #expect(preconditionType(refused) == "ACCOUNT_DELETED")
        let noBoard = await expectError(.failedPrecondition) {
            _ = try await sam.social.getLeaderboard(.init(), options: sam.options)
        }
        #expect(preconditionType(noBoard) == "ACCOUNT_DELETED")
        await expectError(.failedPrecondition) {
            _ = try await sam.fixture.socialInternal.getLeaderboardTop(.with { $0.userID = sam.userID })
        }
        let toNobody = try await chris.sendFriendRequest(username: sam.username)
        #expect(toNobody.state == .pending)
        #expect(!toNobody.hasOther)
        // Delivered again, the deletion changes nothing.
        try await sam.deleteAccount()
        #expect(try await alex.partnershipID() == nil)
    }

    @Test func namesFollowAuthsEventsLastWriteWins() async throws {
        let sam = try await TestUser(displayName: "Sam")
        let alex = try await TestUser(displayName: "Alex")
        try await sam.makeFriends(with: alex)
        func update(_ displayName: String, at instant: String) async throws {
            var updated = Habitflow_Events_V1_UserUpdated()
            updated.userID = alex.userID
            updated.username = alex.username
            updated.displayName = displayName
            updated.updatedAt = Google_Protobuf_Timestamp(date: try instantFrom(instant))
            try await alex.fixture.deliverAccountEvent(updated, userID: alex.userID)
        }
        try await update("Alexandra", at: "2099-01-02T00:00:00Z")
        try await update("Stale", at: "2099-01-01T00:00:00Z")
        let friends = try await sam.social.listFriends(.init(), options: sam.options)
        #expect(friends.friends.map(\.person.displayName) == ["Alexandra"])
        #expect(friends.friends.map(\.person.username) == [alex.username])
        // The leaderboard names people as the friends list does (auth itself still says "Alex").
        let board = try await sam.social.getLeaderboard(.init(), options: sam.options)
        #expect(board.entries.first { !$0.me }?.person.displayName == "Alexandra")
        #expect(board.me.person.displayName == "Sam")
        // UserCreated carries the display name; one without (published before it had the field): the username
        // stands in (here as the latest names).
        var created = Habitflow_Events_V1_UserCreated()
        created.userID = alex.userID
        created.username = alex.username
        created.displayName = "Alex again"
        created.createdAt = Google_Protobuf_Timestamp(date: try instantFrom("2099-01-03T00:00:00Z"))
        try await alex.fixture.deliverAccountEvent(created, userID: alex.userID)
        #expect(try await sam.social.listFriends(.init(), options: sam.options).friends.map(\.person.displayName) == [
            "Alex again"
        ])
        created.displayName = ""
        created.createdAt = Google_Protobuf_Timestamp(date: try instantFrom("2099-01-04T00:00:00Z"))
        try await alex.fixture.deliverAccountEvent(created, userID: alex.userID)
        let renamed = try await sam.social.listFriends(.init(), options: sam.options)
        #expect(renamed.friends.map(\.person.displayName) == [alex.username])
    }

    @Test func theExportHoldsFriendsRequestsBlocksThePartnershipAndSettings() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let chris = try await TestUser()
        let dana = try await TestUser()
        let partnership = try await sam.makePartners(with: alex)
        let toChris = try await sam.sendFriendRequest(username: chris.username)
        let canceled = try await sam.sendFriendRequest(email: "gone-\(UUID().uuidString.prefix(6))@example.com")
        _ = try await sam.cancel(canceled)
        try await sam.block(dana)
        let hidden = try await dana.sendFriendRequest(username: sam.username)

        let export = try await sam.fixture.socialInternal.exportUser(.with { $0.userID = sam.userID })
        #expect(export.friends.map(\.person.userID) == [alex.userID])
        #expect(export.friends.first?.partner == true)
        let requestIDs = export.requests.map(\.id)
        #expect(requestIDs.contains(toChris.id))
        #expect(!requestIDs.contains(canceled.id))
        #expect(!requestIDs.contains(hidden.id))
        #expect(export.requests.count == 3)  // the friend request and partner request with alex, and chris's
        #expect(export.blocked.map(\.person.userID) == [dana.userID])
        #expect(export.partnership.id == partnership.id)
        #expect(export.settings.shareWeeklyScore)
        #expect(!export.settings.privateMode)
        let nobody = try await sam.fixture.socialInternal.exportUser(
            .with { $0.userID = UUID().uuidString.lowercased() })
        #expect(nobody.friends.isEmpty && !nobody.hasPartnership && nobody.settings.shareWeeklyScore)
    }

    @Test func purgeUserRemovesEverythingOnce() async throws {
        try await PublishedEvents.install()
        let sam = try await TestUser()
        let alex = try await TestUser()
        let partnership = try await alex.makePartners(with: sam)
        let internalClient = sam.fixture.socialInternal
        #expect(try await internalClient.purgeUser(.with { $0.userID = sam.userID }).existed)
        #expect(try await alex.friendIDs().isEmpty)
        #expect(try await alex.partnershipID() == nil)
        #expect(
            try await PublishedEvents.partnership(partnership.id).last
                == .ended(user: sam.userID, partner: alex.userID))
        #expect(try await !internalClient.purgeUser(.with { $0.userID = sam.userID }).existed)
        await expectError(.failedPrecondition) { _ = try await sam.social.getPartner(.init(), options: sam.options) }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await internalClient.purgeUser(.with { $0.userID = "sam" })
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await internalClient.getPartnership(.init())
        }
    }

    /// The settings are written by SQL here (UpdateSharingSettings belongs to the leaderboard's part of the service).
    @Test func aDeletedCategoryLeavesTheSharedCategoriesAndTheFeedCarriesTheSettings() async throws {
        let sam = try await TestUser()
        let kept = UUID()
        let deleted = UUID()
        let pool = sam.fixture.social.runtime.pool
        _ = try await sam.social.listFriends(.init(), options: sam.options)
        try await pool.execute(
            """
            INSERT INTO sharing_settings (user_id, shared_category_ids, updated_at, change_seq) \
            VALUES (\(sam.id), \([deleted, kept])::uuid[], now(), \
            (SELECT change_seq FROM users WHERE user_id = \(sam.id)))
            """)
        let before = try await sam.social.listChanges(.init(), options: sam.options)
        #expect(before.changes.map(\.settingsValue?.sharedCategoryIds) == [[deleted, kept].map(\.lowercasedUUID)])
        var event = Habitflow_Events_V1_CategoryDeleted()
        event.userID = sam.userID
        event.categoryID = deleted.lowercasedUUID
        try await sam.fixture.deliver(
            event, aggregate: ("category", event.categoryID), source: "habits", to: [sam.fixture.socialInternalChannel])
        let after = try await sam.social.listChanges(.with { $0.cursor = before.nextCursor }, options: sam.options)
        #expect(after.changes.map(\.settingsValue?.sharedCategoryIds) == [[kept.lowercasedUUID]])
        let export = try await sam.fixture.socialInternal.exportUser(.with { $0.userID = sam.userID })
        #expect(export.settings.sharedCategoryIds == [kept.lowercasedUUID])
        let remembered = try await pool.queryRow(
            "SELECT 1 FROM deleted_categories WHERE user_id = \(sam.id) AND category_id = \(deleted)")
        #expect(remembered != nil)
    }

    @Test func internalCallsNeedAService() async throws {
        let sam = try await TestUser()
        await expectError(.permissionDenied) {
            _ = try await SocialInternalClient(transport: sam.fixture.socialChannel).getPartnership(
                .with { $0.userID = sam.userID }, options: sam.options)
        }
    }
}
