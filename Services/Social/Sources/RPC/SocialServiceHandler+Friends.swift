internal import HabitFlowRPC
internal import HabitFlowSocialProtos

// BUILD PLACEHOLDER: replaced by the helper that owns this area; never merged to main as is.
extension SocialServiceHandler {
    func sendFriendRequest(request: Habitflow_Social_V1_SendFriendRequestRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Request {
        throw RPCError(.unimplemented, "sendFriendRequest")
    }
    func listRequests(request: Habitflow_Social_V1_ListRequestsRequest, context: ServerContext) async throws -> Habitflow_Social_V1_ListRequestsResponse {
        throw RPCError(.unimplemented, "listRequests")
    }
    func acceptRequest(request: Habitflow_Social_V1_AcceptRequestRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Request {
        throw RPCError(.unimplemented, "acceptRequest")
    }
    func declineRequest(request: Habitflow_Social_V1_DeclineRequestRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Request {
        throw RPCError(.unimplemented, "declineRequest")
    }
    func cancelRequest(request: Habitflow_Social_V1_CancelRequestRequest, context: ServerContext) async throws -> Habitflow_Social_V1_Request {
        throw RPCError(.unimplemented, "cancelRequest")
    }
    func listFriends(request: Habitflow_Social_V1_ListFriendsRequest, context: ServerContext) async throws -> Habitflow_Social_V1_ListFriendsResponse {
        throw RPCError(.unimplemented, "listFriends")
    }
    func removeFriend(request: Habitflow_Social_V1_RemoveFriendRequest, context: ServerContext) async throws -> Habitflow_Social_V1_RemoveFriendResponse {
        throw RPCError(.unimplemented, "removeFriend")
    }
    func blockUser(request: Habitflow_Social_V1_BlockUserRequest, context: ServerContext) async throws -> Habitflow_Social_V1_BlockUserResponse {
        throw RPCError(.unimplemented, "blockUser")
    }
    func unblockUser(request: Habitflow_Social_V1_UnblockUserRequest, context: ServerContext) async throws -> Habitflow_Social_V1_UnblockUserResponse {
        throw RPCError(.unimplemented, "unblockUser")
    }
    func listBlockedUsers(request: Habitflow_Social_V1_ListBlockedUsersRequest, context: ServerContext) async throws -> Habitflow_Social_V1_ListBlockedUsersResponse {
        throw RPCError(.unimplemented, "listBlockedUsers")
    }
}
