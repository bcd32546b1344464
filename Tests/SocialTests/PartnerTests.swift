import Foundation
import HabitFlowRPC
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Testing

/// Partners: one at a time, between friends; starting and ending one publishes the events goals consumes.
@Suite struct PartnerTests {
    @Test func aFriendAcceptsAndTheyArePartners() async throws {
        try await PublishedEvents.install()
        let sam = try await TestUser(displayName: "Sam")
        let alex = try await TestUser(displayName: "Alex")
        try await sam.makeFriends(with: alex)
        let sent = try await sam.social.sendPartnerRequest(.with { $0.userID = alex.userID }, options: sam.options)
        #expect(sent.kind == .partner)
        #expect(sent.state == .pending)
        #expect(sent.other.userID == alex.userID)
        #expect(try await alex.pendingRequests(.incoming, kind: .partner).map(\.id) == [sent.id])
        #expect(try await alex.pendingRequests(.incoming, kind: .friend).isEmpty)
        await expectError(.notFound) { _ = try await sam.social.getPartner(.init(), options: sam.options) }

        let accepted = try await alex.accept(sent)
        #expect(accepted.state == .accepted)
        let mine = try await sam.social.getPartner(.init(), options: sam.options)
        let theirs = try await alex.social.getPartner(.init(), options: alex.options)
        #expect(mine.id == theirs.id)
        #expect(mine.partner.userID == alex.userID)
        #expect(mine.partner.displayName == "Alex")
        #expect(theirs.partner.userID == sam.userID)
        #expect(try await sam.partnershipID() == mine.id)
        let internalView = try await sam.fixture.socialInternal.getPartnership(.with { $0.userID = alex.userID })
        #expect(internalView.found)
        #expect(internalView.partnerUserID == sam.userID)
        #expect(internalView.startTime == mine.startTime)
        let friends = try await sam.social.listFriends(.init(), options: sam.options)
        #expect(friends.friends.map(\.partner) == [true])
        #expect(try await PublishedEvents.partnership(mine.id) == [.started(user: alex.userID, partner: sam.userID)])
    }

    @Test func onlyAFriendCanBeAsked() async throws {
        let sam = try await TestUser()
        let stranger = try await TestUser()
        await expectError(.notFound) {
            _ = try await sam.social.sendPartnerRequest(.with { $0.userID = stranger.userID }, options: sam.options)
        }
        await expectError(.notFound) {
            _ = try await sam.social.sendPartnerRequest(.with { $0.userID = sam.userID }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await sam.social.sendPartnerRequest(.with { $0.userID = "stranger" }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "request_id") {
            _ = try await sam.social.sendPartnerRequest(
                .with {
                    $0.userID = stranger.userID
                    $0.requestID = "again"
                }, options: sam.options)
        }
        #expect(try await stranger.pendingRequests().isEmpty)
    }

    @Test func onePartnerAtATime() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let chris = try await TestUser()
        try await sam.makePartners(with: alex)
        try await sam.makeFriends(with: chris)
        try await chris.makeFriends(with: alex)
        let mine = await expectError(.failedPrecondition) {
            _ = try await sam.social.sendPartnerRequest(.with { $0.userID = chris.userID }, options: sam.options)
        }
        #expect(mine?.errorReason == "HAS_PARTNER")
        #expect(mine?.message.contains("you already have a partner") == true)
        let theirs = await expectError(.failedPrecondition) {
            _ = try await chris.social.sendPartnerRequest(.with { $0.userID = alex.userID }, options: chris.options)
        }
        #expect(theirs?.errorReason == "HAS_PARTNER")
        #expect(theirs?.message.contains("they already have a partner") == true)
    }

    @Test func onePendingPartnerRequestAtATimeAndRetriesReturnIt() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let chris = try await TestUser()
        try await sam.makeFriends(with: alex)
        try await sam.makeFriends(with: chris)
        let requestID = UUID().uuidString.lowercased()
        let first = try await sam.social.sendPartnerRequest(
            .with {
                $0.userID = alex.userID
                $0.requestID = requestID
            }, options: sam.options)
        #expect(first.id == requestID)
        let retried = try await sam.social.sendPartnerRequest(
            .with {
                $0.userID = alex.userID
                $0.requestID = requestID
            }, options: sam.options)
        #expect(retried == first)
        for friend in [alex, chris] {
            let refused = await expectError(.failedPrecondition) {
                _ = try await sam.social.sendPartnerRequest(.with { $0.userID = friend.userID }, options: sam.options)
            }
            #expect(refused?.errorReason == "PARTNER_REQUEST_PENDING")
        }
        // Canceled, a new one may go out.
        _ = try await sam.cancel(first)
        _ = try await sam.social.sendPartnerRequest(.with { $0.userID = chris.userID }, options: sam.options)
    }

    @Test func whenTheFriendAskedAlreadyTheyBecomePartnersAtOnce() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        try await sam.makeFriends(with: alex)
        let earlier = try await alex.social.sendPartnerRequest(.with { $0.userID = sam.userID }, options: alex.options)
        let answer = try await sam.social.sendPartnerRequest(.with { $0.userID = alex.userID }, options: sam.options)
        #expect(answer.id == earlier.id)
        #expect(answer.state == .accepted)
        #expect(answer.other.userID == alex.userID)
        #expect(try await sam.social.getPartner(.init(), options: sam.options).partner.userID == alex.userID)
    }

    @Test func acceptingCancelsTheOtherPendingPartnerRequests() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let chris = try await TestUser()
        let dana = try await TestUser()
        try await sam.makeFriends(with: alex)
        try await sam.makeFriends(with: chris)
        try await alex.makeFriends(with: dana)
        let fromChris = try await chris.sendPartnerRequest(to: sam)
        let fromDana = try await dana.sendPartnerRequest(to: alex)
        let fromAlex = try await alex.sendPartnerRequest(to: sam)
        _ = try await sam.accept(fromAlex)
        #expect(try await sam.pendingRequests().isEmpty)
        #expect(try await alex.pendingRequests().isEmpty)
        #expect(try await chris.pendingRequests().isEmpty)
        #expect(try await dana.pendingRequests().isEmpty)
        // The senders' feeds carry the cancellation.
        let chrisSees = try await chris.social.listChanges(.init(), options: chris.options).changes
            .compactMap(\.requestValue).first { $0.id == fromChris.id }
        #expect(chrisSees?.state == .canceled)
        let danaSees = try await dana.social.listChanges(.init(), options: dana.options).changes
            .compactMap(\.requestValue).first { $0.id == fromDana.id }
        #expect(danaSees?.state == .canceled)
    }

    @Test func eitherPartnerEndsItAndEndingAgainSucceeds() async throws {
        try await PublishedEvents.install()
        let sam = try await TestUser()
        let alex = try await TestUser()
        let partnership = try await sam.makePartners(with: alex)
        _ = try await alex.social.endPartnership(.init(), options: alex.options)
        await expectError(.notFound) { _ = try await sam.social.getPartner(.init(), options: sam.options) }
        await expectError(.notFound) { _ = try await alex.social.getPartner(.init(), options: alex.options) }
        #expect(try await sam.partnershipID() == nil)
        _ = try await alex.social.endPartnership(.init(), options: alex.options)
        _ = try await sam.social.endPartnership(.init(), options: sam.options)
        #expect(try await sam.friendIDs() == [alex.userID])
        #expect(
            try await PublishedEvents.partnership(partnership.id) == [
                .started(user: alex.userID, partner: sam.userID), .ended(user: alex.userID, partner: sam.userID),
            ])
        // They may be partners again, in a new partnership.
        let again = try await alex.makePartners(with: sam)
        #expect(again.id != partnership.id)
    }

    @Test func unfriendingEndsThePartnership() async throws {
        try await PublishedEvents.install()
        let sam = try await TestUser()
        let alex = try await TestUser()
        let partnership = try await sam.makePartners(with: alex)
        _ = try await sam.social.removeFriend(.with { $0.userID = alex.userID }, options: sam.options)
        #expect(try await alex.partnershipID() == nil)
        #expect(
            try await PublishedEvents.partnership(partnership.id).last
                == .ended(user: sam.userID, partner: alex.userID))
    }

    @Test func aPartnerRequestNeedsTheFriendshipWhenAccepted() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        try await sam.makeFriends(with: alex)
        let sent = try await sam.social.sendPartnerRequest(.with { $0.userID = alex.userID }, options: sam.options)
        _ = try await sam.social.removeFriend(.with { $0.userID = alex.userID }, options: sam.options)
        let refused = await expectError(.failedPrecondition) { _ = try await alex.accept(sent) }
        #expect(refused?.errorReason == "NOT_FRIENDS")
        #expect(try await alex.partnershipID() == nil)
    }
}
