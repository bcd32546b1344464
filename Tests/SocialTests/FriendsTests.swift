import Foundation
import HabitFlowRPC
import HabitFlowSocialProtos
import HabitFlowTestSupport
import Testing

/// Friend requests and friends, over real gRPC and real Postgres.
@Suite struct FriendsTests {
    @Test func aRequestByUsernameAcceptedMakesFriendsOnBothSides() async throws {
        let sam = try await TestUser(displayName: "Sam")
        let alex = try await TestUser(displayName: "Alex")
        let sent = try await sam.sendFriendRequest(username: " \(alex.username.uppercased()) ")
        #expect(sent.state == .pending)
        #expect(sent.kind == .friend)
        #expect(sent.outgoing)
        #expect(!sent.hasOther)
        #expect(sent.addressedTo == alex.username.uppercased())
        let incoming = try await alex.pendingRequests(.incoming)
        #expect(incoming.map(\.id) == [sent.id])
        #expect(incoming.first?.other.userID == sam.userID)
        #expect(incoming.first?.other.username == sam.username)
        #expect(incoming.first?.other.displayName == "Sam")
        #expect(incoming.first?.addressedTo == "")
        #expect(try await alex.pendingRequests(.outgoing).isEmpty)
        #expect(try await sam.pendingRequests(.outgoing).map(\.id) == [sent.id])

        let accepted = try await alex.accept(sent)
        #expect(accepted.state == .accepted)
        #expect(!accepted.outgoing)
        #expect(try await sam.friendIDs() == [alex.userID])
        #expect(try await alex.friendIDs() == [sam.userID])
        let friends = try await sam.social.listFriends(.init(), options: sam.options)
        #expect(friends.total == 1)
        #expect(friends.friends.first?.person.displayName == "Alex")
        #expect(friends.friends.first?.partner == false)
        // Accepting again returns it unchanged; the sender now sees whom it reached.
        #expect(try await alex.accept(sent).state == .accepted)
        let seenBySender = try await sam.social.listChanges(.init(), options: sam.options).changes
            .compactMap(\.requestValue)
        #expect(seenBySender.first?.state == .accepted)
        #expect(seenBySender.first?.other.userID == alex.userID)
        #expect(try await sam.pendingRequests().isEmpty)
        #expect(try await alex.pendingRequests().isEmpty)
    }

    @Test func aRequestByEmailReachesTheAccount() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let typed = alex.email.uppercased()
        let sent = try await sam.sendFriendRequest(email: "  \(typed)\n")
        #expect(sent.addressedTo == typed)
        #expect(sent.state == .pending)
        #expect(!sent.hasOther)
        let incoming = try await alex.pendingRequests(.incoming, kind: .friend)
        #expect(incoming.map(\.id) == [sent.id])
        // Never an email anywhere the recipient looks.
        #expect(incoming.first?.addressedTo == "")
        #expect(try await alex.pendingRequests(.incoming, kind: .partner).isEmpty)
        _ = try await alex.accept(sent)
        #expect(try await sam.friendIDs() == [alex.userID])
    }

    @Test func aRequestToAnUnknownEmailLooksLikeOneToAKnownEmail() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let known = try await sam.sendFriendRequest(email: alex.email)
        let unknown = try await sam.sendFriendRequest(email: "nobody-\(UUID().uuidString.prefix(8))@example.com")
        for request in [known, unknown] {
            #expect(request.state == .pending)
            #expect(request.outgoing)
            #expect(!request.hasOther)
            #expect(request.createTime == request.updateTime)
        }
        // The same fields, field for field, but the id, the address and the times.
        func shape(_ request: Habitflow_Social_V1_Request) -> Habitflow_Social_V1_Request {
            var copy = request
            copy.id = ""
            copy.addressedTo = ""
            copy.clearCreateTime()
            copy.clearUpdateTime()
            return copy
        }
        #expect(shape(known) == shape(unknown))
        // Both stay pending for the sender, and cancel alike.
        #expect(Set(try await sam.pendingRequests(.outgoing).map(\.id)) == [known.id, unknown.id])
        #expect(try await sam.cancel(unknown).state == .canceled)
        #expect(try await sam.cancel(known).state == .canceled)
        #expect(try await alex.pendingRequests().isEmpty)
    }

    @Test func aDeclineIsSilentForTheSender() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let sent = try await sam.sendFriendRequest(username: alex.username)
        let declined = try await alex.decline(sent)
        #expect(declined.state == .declined)
        #expect(try await alex.pendingRequests().isEmpty)
        #expect(try await alex.decline(sent).state == .declined)
        // The sender still sees it pending, unchanged, and sending again returns it.
        let seen = try await sam.pendingRequests(.outgoing)
        #expect(seen.map(\.id) == [sent.id])
        #expect(seen.first?.state == .pending)
        #expect(seen.first?.updateTime == sent.updateTime)
        #expect(try await sam.sendFriendRequest(username: alex.username).id == sent.id)
        let changes = try await sam.social.listChanges(.init(), options: sam.options).changes
        #expect(changes.compactMap(\.requestValue).map(\.state) == [.pending])
        // A declined request can no longer be accepted; the sender can still cancel it.
        let refused = await expectError(.failedPrecondition) { _ = try await alex.accept(sent) }
        #expect(refused?.errorReason == "REQUEST_NOT_PENDING")
        #expect(try await sam.cancel(sent).state == .canceled)
        #expect(try await sam.cancel(sent).state == .canceled)
        #expect(try await sam.pendingRequests().isEmpty)
        #expect(try await sam.friendIDs().isEmpty)
    }

    @Test func acceptingACanceledRequestIsRefused() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let sent = try await sam.sendFriendRequest(username: alex.username)
        _ = try await sam.cancel(sent)
        #expect(try await alex.pendingRequests().isEmpty)
        let refused = await expectError(.failedPrecondition) { _ = try await alex.accept(sent) }
        #expect(refused?.errorReason == "REQUEST_NOT_PENDING")
        await expectError(.failedPrecondition) { _ = try await alex.decline(sent) }
        #expect(try await alex.friendIDs().isEmpty)
    }

    @Test func aRequestToYourselfIsRefused() async throws {
        let sam = try await TestUser()
        await expectError(.invalidArgument, field: "email") { _ = try await sam.sendFriendRequest(email: sam.email) }
        await expectError(.invalidArgument, field: "username") {
            _ = try await sam.sendFriendRequest(username: sam.username.uppercased())
        }
        #expect(try await sam.pendingRequests().isEmpty)
    }

    @Test func aRepeatedSendReturnsThePendingRequest() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let requestID = UUID().uuidString.lowercased()
        let first = try await sam.sendFriendRequest(username: alex.username, requestID: requestID)
        #expect(first.id == requestID)
        #expect(try await sam.sendFriendRequest(username: alex.username, requestID: requestID) == first)
        #expect(try await sam.sendFriendRequest(username: alex.username.uppercased()) == first)
        let unknown = try await sam.sendFriendRequest(email: "Someone.\(UUID().uuidString.prefix(6))@Example.com")
        #expect(try await sam.sendFriendRequest(email: unknown.addressedTo.lowercased()).id == unknown.id)
        #expect(try await sam.pendingRequests(.outgoing).count == 2)
        #expect(try await alex.pendingRequests(.incoming).count == 1)
        // Another user's request id is not theirs to reuse.
        let taken = await expectError(.alreadyExists) {
            _ = try await alex.sendFriendRequest(email: "other-\(UUID().uuidString)@example.com", requestID: requestID)
        }
        #expect(taken != nil)
    }

    @Test func whenTheOtherSideAskedAlreadyBothBecomeFriends() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let earlier = try await alex.sendFriendRequest(username: sam.username)
        let answer = try await sam.sendFriendRequest(email: alex.email)
        #expect(answer.id == earlier.id)
        #expect(answer.state == .accepted)
        #expect(!answer.outgoing)
        #expect(answer.other.userID == alex.userID)
        #expect(try await sam.friendIDs() == [alex.userID])
        #expect(try await alex.friendIDs() == [sam.userID])
        #expect(try await sam.pendingRequests().isEmpty)
        let again = await expectError(.failedPrecondition) {
            _ = try await sam.sendFriendRequest(username: alex.username)
        }
        #expect(again?.errorReason == "ALREADY_FRIENDS")
    }

    @Test func requestsOfOthersAreNotFoundAndRolesAreKept() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        let stranger = try await TestUser()
        let sent = try await sam.sendFriendRequest(username: alex.username)
        for call in [stranger.accept, stranger.decline, stranger.cancel] {
            await expectError(.notFound) { _ = try await call(sent) }
        }
        var unknown = sent
        unknown.id = UUID().uuidString.lowercased()
        await expectError(.notFound) { _ = try await alex.accept(unknown) }
        let ownAccept = await expectError(.failedPrecondition) { _ = try await sam.accept(sent) }
        #expect(ownAccept?.errorReason == "NOT_RECIPIENT")
        let theirCancel = await expectError(.failedPrecondition) { _ = try await alex.cancel(sent) }
        #expect(theirCancel?.errorReason == "NOT_SENDER")
        #expect(try await alex.pendingRequests(.incoming).map(\.id) == [sent.id])
    }

    @Test func atMost100PendingFriendRequests() async throws {
        let sam = try await TestUser()
        let prefix = UUID().uuidString.prefix(8).lowercased()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<100 {
                group.addTask { _ = try await sam.sendFriendRequest(email: "p\(index)-\(prefix)@example.com") }
            }
            try await group.waitForAll()
        }
        let refused = await expectError(.failedPrecondition) {
            _ = try await sam.sendFriendRequest(email: "p100-\(prefix)@example.com")
        }
        #expect(refused?.errorReason == "PENDING_REQUEST_LIMIT")
        #expect(preconditionType(refused) == "PENDING_REQUEST_LIMIT")
        // A repeat of a pending one still answers; canceling one frees a slot.
        let existing = try await sam.sendFriendRequest(email: "p7-\(prefix)@example.com")
        _ = try await sam.cancel(existing)
        #expect(try await sam.sendFriendRequest(email: "p100-\(prefix)@example.com").state == .pending)
        let page = try await sam.social.listRequests(.with { $0.pageSize = 60 }, options: sam.options)
        let rest = try await sam.social.listRequests(
            .with { $0.pageToken = page.nextPageToken }, options: sam.options)
        #expect(page.requests.count == 60)
        #expect(rest.requests.count == 40)
        #expect(rest.nextPageToken.isEmpty)
        #expect(Set(page.requests.map(\.id) + rest.requests.map(\.id)).count == 100)
    }

    /// 101 users ask one; the 101 accepts run at once, and only 100 pass (the users' row locks serialize them).
    @Test func the101stFriendIsRefusedEvenUnderConcurrency() async throws {
        let hub = try await TestUser()
        let askers = try await withThrowingTaskGroup(of: TestUser.self) { group in
            for _ in 0...100 { group.addTask { try await TestUser() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var requests: [Habitflow_Social_V1_Request] = []
        for asker in askers { requests.append(try await asker.sendFriendRequest(username: hub.username)) }
        let outcomes = await withTaskGroup(of: String.self) { group in
            for request in requests {
                group.addTask {
                    do {
                        _ = try await hub.accept(request)
                        return "accepted"
                    } catch let error as RPCError {
                        return error.errorReason ?? "\(error.code)"
                    } catch {
                        return "\(error)"
                    }
                }
            }
            return await group.reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
        }
        #expect(outcomes == ["accepted": 100, "FRIEND_LIMIT": 1])
        let friends = try await hub.social.listFriends(.init(), options: hub.options)
        #expect(friends.total == 100)
        let newcomer = try await TestUser()
        let refused = await expectError(.failedPrecondition) {
            _ = try await hub.sendFriendRequest(username: newcomer.username)
        }
        #expect(refused?.errorReason == "FRIEND_LIMIT")
        #expect(refused?.message.contains("you have 100 friends") == true)
        // Asked by someone else, the hub's side is the one that is full.
        let asked = try await newcomer.sendFriendRequest(username: hub.username)
        let full = await expectError(.failedPrecondition) { _ = try await hub.accept(asked) }
        #expect(full?.errorReason == "FRIEND_LIMIT")
    }

    @Test func friendsAreListedByDisplayNameAndPaged() async throws {
        let me = try await TestUser()
        let suffix = UUID().uuidString.prefix(4)
        let names = ["bea \(suffix)", "Ann \(suffix)", "carl \(suffix)"]
        for name in names {
            let friend = try await TestUser(displayName: name)
            try await me.makeFriends(with: friend)
        }
        let first = try await me.social.listFriends(.with { $0.pageSize = 2 }, options: me.options)
        #expect(first.total == 3)
        #expect(first.friends.map(\.person.displayName) == ["Ann \(suffix)", "bea \(suffix)"])
        let second = try await me.social.listFriends(
            .with {
                $0.pageSize = 2
                $0.pageToken = first.nextPageToken
            }, options: me.options)
        #expect(second.friends.map(\.person.displayName) == ["carl \(suffix)"])
        #expect(second.nextPageToken.isEmpty)
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await me.social.listFriends(.with { $0.pageToken = "garbage" }, options: me.options)
        }
    }

    @Test func removingAFriendEndsItOnBothSidesAndAgainSucceeds() async throws {
        let sam = try await TestUser()
        let alex = try await TestUser()
        try await sam.makeFriends(with: alex)
        _ = try await sam.social.removeFriend(.with { $0.userID = alex.userID }, options: sam.options)
        #expect(try await sam.friendIDs().isEmpty)
        #expect(try await alex.friendIDs().isEmpty)
        _ = try await sam.social.removeFriend(.with { $0.userID = alex.userID }, options: sam.options)
        _ = try await sam.social.removeFriend(
            .with { $0.userID = UUID().uuidString.lowercased() }, options: sam.options)
        await expectError(.invalidArgument, field: "user_id") {
            _ = try await sam.social.removeFriend(.with { $0.userID = "alex" }, options: sam.options)
        }
        // They can be friends again.
        try await alex.makeFriends(with: sam)
        #expect(try await sam.friendIDs() == [alex.userID])
    }

    @Test func badInputNamesTheField() async throws {
        let sam = try await TestUser()
        await expectError(.invalidArgument, field: "email") { _ = try await sam.sendFriendRequest(email: "no-at-sign") }
        await expectError(.invalidArgument, field: "email") { _ = try await sam.sendFriendRequest(email: "a@b@c.d") }
        await expectError(.invalidArgument, field: "email") {
            _ = try await sam.sendFriendRequest(email: String(repeating: "a", count: 250) + "@x.com")
        }
        await expectError(.invalidArgument, field: "username") { _ = try await sam.sendFriendRequest(username: "ab") }
        await expectError(.invalidArgument, field: "username") {
            _ = try await sam.sendFriendRequest(username: "has space")
        }
        await expectError(.invalidArgument, field: "username") {
            _ = try await sam.sendFriendRequest(username: String(repeating: "a", count: 31))
        }
        await expectError(.invalidArgument, field: "request_id") {
            _ = try await sam.sendFriendRequest(username: "someone", requestID: "not-a-uuid")
        }
        await expectError(.invalidArgument, field: "email") {
            _ = try await sam.social.sendFriendRequest(.init(), options: sam.options)
        }
        await expectError(.invalidArgument, field: "request_id") {
            _ = try await sam.social.acceptRequest(.with { $0.requestID = "x" }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "request_id") {
            _ = try await sam.social.declineRequest(.with { $0.requestID = "x" }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "request_id") {
            _ = try await sam.social.cancelRequest(.init(), options: sam.options)
        }
        await expectError(.invalidArgument, field: "page_size") {
            _ = try await sam.social.listRequests(.with { $0.pageSize = -1 }, options: sam.options)
        }
        await expectError(.invalidArgument, field: "page_token") {
            _ = try await sam.social.listRequests(.with { $0.pageToken = "abc" }, options: sam.options)
        }
    }
}
