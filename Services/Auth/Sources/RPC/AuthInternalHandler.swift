internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowTokens

/// `habitflow.auth.v1.AuthInternal`: for the gateway and other services, never routed from clients.
struct AuthInternalHandler: Habitflow_Auth_V1_AuthInternal.Handler {
    let core: AuthCore

    static let maximumLookups = 100
    static let maximumUserIDs = 500

    func getVerificationKeys(request: Habitflow_Auth_V1_GetVerificationKeysRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_GetVerificationKeysResponse
    {
        let keys = try await core.keyRing.verificationKeys()
        var response = Habitflow_Auth_V1_GetVerificationKeysResponse()
        response.keys = keys.map(Habitflow_Auth_V1_VerificationKey.init)
        let keySet = JSONWebKeySet(
            keys: keys.map { VerificationKey(keyID: $0.keyID, publicKey: $0.publicKey).jsonWebKey })
        response.jwksJson = String(decoding: keySet.json(), as: UTF8.self)
        response.issuer = core.settings.issuer
        response.audience = core.settings.audience
        return response
    }

    func checkSession(request: Habitflow_Auth_V1_CheckSessionRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_CheckSessionResponse
    {
        var rules = RequestValidator()
        let sessionID = rules.uuid(request.sessionID, field: "session_id")
        let userID = rules.uuid(request.userID, field: "user_id")
        try rules.check()
        var response = Habitflow_Auth_V1_CheckSessionResponse()
        guard let sessionID, let userID,
            let session = try await core.store.session(id: sessionID, userID: userID)
        else {
            response.state = .notFound
            return response
        }
        response.state = session.status(at: core.clock.now()).proto
        return response
    }

    /// For services (social finds people by email or username): refuses calls the gateway forwards for a client, as
    /// every method the gateway does not call itself does.
    func lookupUsers(request: Habitflow_Auth_V1_LookupUsersRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LookupUsersResponse
    {
        try CallerIdentity.requireServiceCaller(of: "AuthInternal")
        var rules = RequestValidator()
        if request.emails.count > Self.maximumLookups {
            rules.reject("emails", "at most \(Self.maximumLookups) per call")
        }
        if request.usernames.count > Self.maximumLookups {
            rules.reject("usernames", "at most \(Self.maximumLookups) per call")
        }
        try rules.check()
        var response = Habitflow_Auth_V1_LookupUsersResponse()
        let emails = request.emails.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let usernames = request.usernames.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !emails.isEmpty || !usernames.isEmpty else { return response }
        response.users = try await core.store.users(emails: emails, usernames: usernames)
            .map(Habitflow_Auth_V1_User.init)
        return response
    }

    func getUsers(request: Habitflow_Auth_V1_GetUsersRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_GetUsersResponse
    {
        try CallerIdentity.requireServiceCaller(of: "AuthInternal")
        var rules = RequestValidator()
        if request.userIds.count > Self.maximumUserIDs {
            rules.reject("user_ids", "at most \(Self.maximumUserIDs) per call")
        }
        var ids: [UUID] = []
        for (index, text) in request.userIds.enumerated() {
            if let id = rules.uuid(text, field: "user_ids[\(index)]") { ids.append(id) }
        }
        try rules.check()
        var response = Habitflow_Auth_V1_GetUsersResponse()
        guard !ids.isEmpty else { return response }
        response.users = try await core.store.users(ids: ids).map(Habitflow_Auth_V1_User.init)
        return response
    }

    /// Everything auth holds of an account, for the gateway's data export (which signs as `gateway-export`). Like
    /// every method but GetVerificationKeys and CheckSession (which the gateway itself calls), it refuses calls the
    /// gateway forwards for a client.
    func exportUser(request: Habitflow_Auth_V1_ExportUserRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_ExportUserResponse
    {
        try CallerIdentity.requireServiceCaller(of: "AuthInternal")
        var rules = RequestValidator()
        let userID = rules.id(request.userID, field: "user_id")
        try rules.check()
        var response = Habitflow_Auth_V1_ExportUserResponse()
        // A deleted account leaves nothing behind: it answers as one that never existed.
        guard let user = try await core.store.user(id: userID) else { return response }
        let now = core.clock.now()
        response.user = Habitflow_Auth_V1_User(user)
        response.sessions = try await core.store.sessions(userID: userID).map {
            Habitflow_Auth_V1_ExportedSession($0, now: now)
        }
        response.linkedIdentities = try await core.store.linkedIdentities(userID: userID)
            .map(Habitflow_Auth_V1_LinkedIdentity.init)
        return response
    }
}
