internal import HabitFlowCrypto
public import HabitFlowRPC

/// The statuses the social service answers with, worded once.
extension SocialError: RPCErrorConvertible {
    public var rpcError: RPCError {
        switch self {
        case .accountDeleted(let userID):
            .failedPrecondition(
                type: "ACCOUNT_DELETED", subject: "users/\(userID.lowercasedString)", "the account was deleted")
        case .ownAddress(let field):
            .invalidArgument(field: field, "is your own; a friend request goes to someone else")
        case .ownUser(let field):
            .invalidArgument(field: field, "is you; name another user")
        case .alreadyFriends(let userID):
            .failedPrecondition(
                reason: "ALREADY_FRIENDS", subject: "users/\(userID.lowercasedString)", "you are friends already")
        case .blocked(let userID):
            .failedPrecondition(
                reason: "BLOCKED", subject: "users/\(userID.lowercasedString)",
                "you blocked this user; unblock them to send a request")
        case .friendLimit(let caller):
            .failedPrecondition(
                reason: "FRIEND_LIMIT", subject: "friends",
                (caller ? "you have" : "they have")
                    + " \(SocialRules.maximumFriends) friends, the most there can be; remove a friend first")
        case .pendingRequestLimit:
            .failedPrecondition(
                reason: "PENDING_REQUEST_LIMIT", subject: "requests",
                "at most \(SocialRules.maximumPendingRequests) friend requests can wait for an answer; "
                    + "cancel one first")
        case .requestNotFound(let requestID):
            .notFound(resourceType: "request", name: requestID.lowercasedString)
        case .notYourRequest(let requestID, let action):
            .failedPrecondition(
                reason: action == "cancel" ? "NOT_SENDER" : "NOT_RECIPIENT",
                subject: "requests/\(requestID.lowercasedString)",
                action == "cancel"
                    ? "only the sender can cancel a request" : "only the recipient can \(action) a request")
        case .requestNotPending(let requestID, let state):
            .failedPrecondition(
                reason: "REQUEST_NOT_PENDING", subject: "requests/\(requestID.lowercasedString)",
                "the request is \(state.rawValue), no longer pending")
        case .notAFriend(let userID):
            .notFound(resourceType: "friend", name: userID.lowercasedString)
        case .notFriends(let userID):
            .failedPrecondition(
                reason: "NOT_FRIENDS", subject: "users/\(userID.lowercasedString)",
                "partners must be friends, and you are no longer friends")
        case .hasPartner(let caller):
            .failedPrecondition(
                reason: "HAS_PARTNER", subject: "partner",
                caller ? "you already have a partner; one at a time" : "they already have a partner")
        case .partnerRequestPending:
            .failedPrecondition(
                reason: "PARTNER_REQUEST_PENDING", subject: "requests",
                "you have a partner request waiting for an answer already; cancel it first")
        case .partnerNotFound:
            .notFound(resourceType: "partner", name: "partner")
        case .requestIDTaken(let requestID):
            .alreadyExists(
                resourceType: "request", name: requestID.lowercasedString, "another request has this request_id")
        case .userNotFound(let username):
            .notFound(resourceType: "user", name: username)
        }
    }
}
