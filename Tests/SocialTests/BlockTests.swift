import Foundation
import HabitFlowRPC
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Testing

/// Blocks hide users both ways: what was between them ends, and the blocked user's requests go nowhere, silently.
@Suite struct BlockTests {
    @Test func blockingEndsTheFriendshipAndThePartnership() async throws {
        try await PublishedEvents.install()
        let sam = try await TestUser()
        let alex = try await TestUser(displayName: "Alex")
        let partnership = try await sam.makePartners(with: alex)
        let blocked = try await sam.social.blockUser(
            .with { $0.username = alex.username.uppercased() }, options: sam.options)
        #expect(blocked.blocked.person.userID == alex.userID)
        #expect(blocked.blocked.person.displayName == "Alex")
        #expect(try await sam.friendIDs().isEmpty)
        #expect(try await alex.friendIDs().isEmpty)
        #expect(try await sam.partnershipID() == nil)
        #expect(try await alex.partnershipID() == nil)
        #expect(
            try await PublishedEvents.partnership(partnership.id).last
                == .ended(user: sam.userID, partner: alex.userID))
        let list = try await sam.social.listBlockedUsers(.init(), options: sam.options)
        #expect(list.blocked.map(\.person.userID) == [alex.userID])
        // Blocking again answers the same block.
        #expect(try await sam.block(alex) == blocked.blocked)
    }

    @Test func theBlockedUsersRequestsAreStoredSilentlyAndTheBlockerCannotSend() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        try await sam.block(alex)
        let silent = try await alex.sendFriendRequest(username: sam.username)
        let ordinary = try await alex.sendFriendRequest(email: "nobody-\(UUID().uuidString.prefix(8))@example.com")
        #expect(silent.state == ordinary.state)
        #expect(silent.hasOther == ordinary.hasOther)
        #expect(try await alex.pendingRequests(.outgoing).count == 2)
        #expect(try await sam.pendingRequests().isEmpty)
        let samSees = try await sam.social.listChanges(.init(), options: sam.options).changes
        #expect(samSees.compactMap(\.requestValue).isEmpty)
        await expectError(.notFound) { _ = try await sam.accept(silent) }
        await expectError(.notFound) { _ = try await sam.decline(silent) }
        let refused = await expectError(.failedPrecondition) { _ = try await sam.sendFriendRequest(email: alex.email) }
        #expect(refused?.errorReason == "BLOCKED")
        // Unblocked, sam may ask; what alex sent while blocked stays hidden.
        _ = try await sam.social.unblockUser(.with { $0.userID = alex.userID }, options: sam.options)
        _ = try await sam.social.unblockUser(.with { $0.userID = alex.userID }, options: sam.options)
        #expect(try await sam.social.listBlockedUsers(.init(), options: sam.options).blocked.isEmpty)
        #expect(try await sam.pendingRequests().isEmpty)
        let asked = try await sam.sendFriendRequest(username: alex.username)
        #expect(asked.state == .pending)
        _ = try await alex.accept(asked)
        #expect(try await sam.friendIDs() == [alex.userID])
    }

    @Test func blockingCancelsPendingRequestsBothWays() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let sent = try await sam.sendFriendRequest(username: alex.username)
        try await alex.block(sam)
        #expect(try await alex.pendingRequests().isEmpty)
        #expect(try await sam.pendingRequests().isEmpty)
        let samSees = try await sam.social.listChanges(.init(), options: sam.options).changes
            .compactMap(\.requestValue).first { $0.id == sent.id }
        #expect(samSees?.state == .canceled)
        await expectError(.notFound) { _ = try await alex.accept(sent) }
    }

    @Test func blockingNeedsSomeoneElse() async throws {
        let sam = try await TestUser()
        await expectError(.notFound) {
            _ = try await sam.social.blockUser(
                .with { $0.username = "nobody_\(UUID().uuidString.prefix(8))" }, options: sam.options)
        }
        await expectError(.notFound) {
            _ = try await sam.social.blockUser(
                .with { $0.userID = UUID().uuidString.lowercased() }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await sam.social.blockUser(.with { $0.userID = sam.userID }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "username") {
            _ = try await sam.social.blockUser(.with { $0.username = sam.username }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await sam.social.blockUser(.with { $0.userID = "x" }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await sam.social.blockUser(.init(), options: sam.options)
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await sam.social.unblockUser(.with { $0.userID = "x" }, options: sam.options)
        }
        #expect(try await sam.social.listBlockedUsers(.init(), options: sam.options).blocked.isEmpty)
    }
}
