import Foundation
import HabitFlowRPC
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Testing

/// The change feed: friends, requests, blocks and partnerships, with tombstones, paged by cursor.
@Suite struct ChangesTests {
    func changes(_ user: TestUser, after cursor: String = "", pageSize: Int32 = 0) async throws
        -> Habitflow_Social_V1_ListChangesResponse
    {
        try await user.social.listChanges(
            .with {
                $0.cursor = cursor
                $0.pageSize = pageSize
            }, options: user.options)
    }

    @Test func theFeedCarriesTombstonesAndContinuesFromItsCursor() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let chris = try await TestUser()
        let partnership = try await sam.makePartners(with: alex)
        _ = try await sam.social.removeFriend(.with { $0.userID = alex.userID }, options: sam.options)
        try await sam.block(chris)
        _ = try await sam.social.unblockUser(.with { $0.userID = chris.userID }, options: sam.options)

        let full = try await changes(sam)
        #expect(!full.hasMore_p)
        let friend = full.changes.first { $0.friendValue?.person.userID == alex.userID }
        #expect(friend?.deleted == true)
        let ended = full.changes.first { $0.partnershipValue?.id == partnership.id }
        #expect(ended?.deleted == true)
        let block = full.changes.first { $0.blockedValue?.person.userID == chris.userID }
        #expect(block?.deleted == true)
        // The friend request and the partner request, each once, in their latest state.
        let requests = full.changes.compactMap(\.requestValue)
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { $0.state == .accepted })
        #expect(Set(requests.map(\.kind)) == [.friend, .partner])

        // Nothing new since; then one new request, alone.
        let none = try await changes(sam, after: full.nextCursor)
        #expect(none.changes.isEmpty)
        #expect(none.nextCursor == full.nextCursor)
        let sent = try await sam.sendFriendRequest(username: chris.username)
        let next = try await changes(sam, after: full.nextCursor)
        #expect(next.changes.map(\.requestValue?.id) == [sent.id])
        // Chris sees it too, from their side.
        #expect(try await changes(chris).changes.compactMap(\.requestValue).map(\.id) == [sent.id])

        // Page by page, the same changes in the same order.
        var paged: [Habitflow_Social_V1_Change] = []
        var cursor = ""
        var more = true
        while more {
            let page = try await changes(sam, after: cursor, pageSize: 1)
            #expect(page.changes.count <= 1)
            paged += page.changes
            cursor = page.nextCursor
            more = page.hasMore_p
        }
        #expect(paged == (try await changes(sam)).changes)
    }

    @Test func aDeclineReachesOnlyTheRecipientsFeed() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let sent = try await sam.sendFriendRequest(username: alex.username)
        let samBefore = try await changes(sam)
        let alexBefore = try await changes(alex)
        _ = try await alex.decline(sent)
        #expect(try await changes(sam, after: samBefore.nextCursor).changes.isEmpty)
        let alexAfter = try await changes(alex, after: alexBefore.nextCursor)
        #expect(alexAfter.changes.compactMap(\.requestValue).map(\.state) == [.declined])
    }

    @Test func aBadCursorIsRefused() async throws {
        let sam = try await TestUser()
        await expectError(.invalidArgument, field: "cursor") { _ = try await changes(sam, after: "not-a-cursor") }
        await expectError(.invalidArgument, field: "page_size") { _ = try await changes(sam, pageSize: -5) }
    }
}
