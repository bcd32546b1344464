internal import Foundation
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos

/// Friend requests, friends and blocks.
extension SocialServiceHandler {
    static let requestPageSizes = PageSizeRule.standard
    static let friendPageSizes = PageSizeRule.standard
    static let blockPageSizes = PageSizeRule.standard

    func sendFriendRequest(
        request: Habitflow_Social_V1_SendFriendRequestRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_Request {
        var validator = RequestValidator()
        let requestID = validator.clientID(request.requestID, field: "request_id")
        let address: String
        let field: String
        switch request.recipient {
        case .email(let email):
            field = "email"
            address = validator.email(email, field: field)
        case .username(let username):
            field = "username"
            address = validator.username(username, field: field)
        case nil:
            field = "email"
            address = ""
            validator.reject("email", "is required (or username)")
        }
        try validator.check()
        let user = try await caller()
        if let requestID, let earlier = try await store.request(store.pool, id: requestID),
            earlier.sender.id == user.id
        {
            return earlier.proto(for: user.id)
        }
        let options = CallOptions().propagating(from: context)
        let recipient =
            field == "email"
            ? try await people.person(email: address, options: options)
            : try await people.person(username: address, options: options)
        if recipient?.id == user.id { throw SocialError.ownAddress(field: field) }
        let sent = try await store.sendFriendRequest(
            from: user.id, address: address, recipient: recipient, requestID: requestID, now: clock.now)
        return sent.proto(for: user.id)
    }

    func listRequests(
        request: Habitflow_Social_V1_ListRequestsRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_ListRequestsResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.requestPageSizes)
        let kind = validator.kindFilter(request.kind, field: "kind")
        let direction = request.direction
        if case .UNRECOGNIZED = direction { validator.reject("direction", "must be INCOMING or OUTGOING, or unset") }
        let list = "requests:\(direction.rawValue):\(kind?.rawValue ?? "")"
        let offset = validator.pageOffset(request.pageToken, list: list)
        try validator.check()
        let user = try await caller()
        let page = try await store.pendingRequests(
            of: user.id, incoming: direction != .outgoing, outgoing: direction != .incoming, kind: kind,
            offset: offset, limit: pageSize + 1)
        return .with {
            $0.requests = page.prefix(pageSize).map { $0.proto(for: user.id) }
            if page.count > pageSize { $0.nextPageToken = PageToken.encode(list: list, [String(offset + pageSize)]) }
        }
    }

    private func requestID(_ text: String) throws -> UUID {
        var validator = RequestValidator()
        let id = validator.id(text, field: "request_id")
        try validator.check()
        return id
    }

    func acceptRequest(
        request: Habitflow_Social_V1_AcceptRequestRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_Request {
        let id = try requestID(request.requestID)
        let user = try await caller()
        return try await store.acceptRequest(id, by: user.id, now: clock.now).proto(for: user.id)
    }

    func declineRequest(
        request: Habitflow_Social_V1_DeclineRequestRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_Request {
        let id = try requestID(request.requestID)
        let user = try await caller()
        return try await store.declineRequest(id, by: user.id, now: clock.now).proto(for: user.id)
    }

    func cancelRequest(
        request: Habitflow_Social_V1_CancelRequestRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_Request {
        let id = try requestID(request.requestID)
        let user = try await caller()
        return try await store.cancelRequest(id, by: user.id, now: clock.now).proto(for: user.id)
    }

    func listFriends(
        request: Habitflow_Social_V1_ListFriendsRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_ListFriendsResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.friendPageSizes)
        let offset = validator.pageOffset(request.pageToken, list: "friends")
        try validator.check()
        let user = try await caller()
        let page = try await store.friends(of: user.id, offset: offset, limit: pageSize)
        return .with {
            $0.friends = page.friends.map(\.proto)
            $0.total = Int32(page.total)
            if offset + page.friends.count < page.total {
                $0.nextPageToken = PageToken.encode(list: "friends", [String(offset + page.friends.count)])
            }
        }
    }

    func removeFriend(
        request: Habitflow_Social_V1_RemoveFriendRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_RemoveFriendResponse {
        var validator = RequestValidator()
        let friendID = validator.id(request.userID, field: "user_id")
        try validator.check()
        let user = try await caller()
        try await store.removeFriend(user.id, friend: friendID, now: clock.now)
        return .init()
    }

    func blockUser(
        request: Habitflow_Social_V1_BlockUserRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_BlockUserResponse {
        var validator = RequestValidator()
        var userID: UUID?
        var username: String?
        switch request.user {
        case .userID(let text): userID = validator.id(text, field: "user_id")
        case .username(let text): username = validator.username(text, field: "username")
        case nil: validator.reject("user_id", "is required (or username)")
        }
        try validator.check()
        let user = try await caller()
        let options = CallOptions().propagating(from: context)
        let person: PersonRecord
        if let userID {
            if userID == user.id { throw SocialError.ownUser(field: "user_id") }
            guard let found = try await people.people([userID], options: options)[userID] else {
                throw SocialError.userNotFound(userID.uuidString.lowercased())
            }
            person = found
        } else {
            let name = username ?? ""
            guard let found = try await people.person(username: name, options: options) else {
                throw SocialError.userNotFound(name)
            }
            if found.id == user.id { throw SocialError.ownUser(field: "username") }
            person = found
        }
        let block = try await store.block(user.id, person, now: clock.now)
        return .with { $0.blocked = block.proto }
    }

    func unblockUser(
        request: Habitflow_Social_V1_UnblockUserRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_UnblockUserResponse {
        var validator = RequestValidator()
        let otherID = validator.id(request.userID, field: "user_id")
        try validator.check()
        let user = try await caller()
        try await store.unblock(user.id, otherID, now: clock.now)
        return .init()
    }

    func listBlockedUsers(
        request: Habitflow_Social_V1_ListBlockedUsersRequest, context: ServerContext
    ) async throws -> Habitflow_Social_V1_ListBlockedUsersResponse {
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: Self.blockPageSizes)
        let offset = validator.pageOffset(request.pageToken, list: "blocks")
        try validator.check()
        let user = try await caller()
        let page = try await store.blocks(of: user.id, offset: offset, limit: pageSize + 1)
        return .with {
            $0.blocked = page.prefix(pageSize).map(\.proto)
            if page.count > pageSize {
                $0.nextPageToken = PageToken.encode(list: "blocks", [String(offset + pageSize)])
            }
        }
    }
}
