public import Foundation

/// What the social rules refuse. The RPC layer turns each case into its gRPC status (`SocialError+RPC.swift`).
public enum SocialError: Error, Hashable {
    /// The account was deleted: its calls are refused and nothing of it is re-created.
    case accountDeleted(UUID)
    /// A friend request to the caller's own email or username (`field` names which).
    case ownAddress(field: String)
    /// A call naming the caller where another user is meant (`field` names it).
    case ownUser(field: String)
    /// A friend request to someone who is a friend already.
    case alreadyFriends(UUID)
    /// A request to someone the caller blocked.
    case blocked(UUID)
    /// A side of a new friendship has `maximumFriends` already; `caller` tells which.
    case friendLimit(caller: Bool)
    /// The caller has `maximumPendingRequests` outgoing friend requests pending.
    case pendingRequestLimit
    /// A request the caller cannot see (another user's, unknown, or hidden by a block).
    case requestNotFound(UUID)
    /// Accept or decline by the sender, or cancel by the recipient.
    case notYourRequest(UUID, action: String)
    /// A transition out of a terminal state other than the one asked for (accepting a canceled request).
    case requestNotPending(UUID, state: RequestState)
    /// A user who is not the caller's friend, where a friend is needed (a partner request).
    case notAFriend(UUID)
    /// Accepting a partner request when the two are no longer friends.
    case notFriends(UUID)
    /// A side of a new partnership has a partner; `caller` tells which.
    case hasPartner(caller: Bool)
    /// The caller has a partner request pending already (one at a time).
    case partnerRequestPending
    /// The caller has no partner.
    case partnerNotFound
    /// A client-assigned request id another request has.
    case requestIDTaken(UUID)
    /// No account has this username (blocking by username).
    case userNotFound(String)
}
