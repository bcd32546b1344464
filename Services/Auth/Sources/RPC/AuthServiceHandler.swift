internal import HabitFlowInternalCredential
internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowServiceKit
internal import HabitFlowCrypto

/// `habitflow.auth.v1.AuthService`: the public API, reached through the gateway.
struct AuthServiceHandler: Habitflow_Auth_V1_AuthService.Handler {
    let core: AuthCore

    private var settings: AuthSettings { core.settings }
    private var store: AuthStore { core.store }

    // MARK: - Register and sign in

    func register(request: Habitflow_Auth_V1_RegisterRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_RegisterResponse
    {
        var rules = RequestValidator()
        let email = rules.email(request.email, field: "email")
        let username = rules.username(request.username, field: "username")
        rules.password(request.password, field: "password", email: email)
        let timeZone = rules.timeZone(request.timeZone, field: "time_zone")
        let displayName = rules.displayName(request.displayName, field: "display_name")
        let device = rules.device(request.device, field: "device")
        try rules.check()

        // Refuse a taken email or username before spending a bcrypt on it; the unique indexes catch races.
        if try await store.user(email: email) != nil { throw AuthError.emailInUse }
        if try await store.usernameTaken(username) { throw AuthError.usernameInUse }
        let hash = try await core.hasher.hash(request.password)
        let key = try await core.keyRing.signingKey()
        let now = core.clock.now()
        let user = UserRecord(
            id: UUID.random(), email: email, emailVerified: false, username: username,
            displayName: displayName.isEmpty ? username : displayName, timeZone: timeZone, passwordHash: hash,
            createdAt: now, updatedAt: now)
        let registered = try await store.register(
            user, device: device, clientAddress: core.clientAddress(context),
            sessionLifetime: settings.refreshTokenLifetime, now: now)
        var response = Habitflow_Auth_V1_RegisterResponse()
        response.user = Habitflow_Auth_V1_User(registered.user)
        response.tokens = try core.tokens(for: registered.session, key: key, now: now)
        return response
    }

    func login(request: Habitflow_Auth_V1_LoginRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LoginResponse
    {
        var rules = RequestValidator()
        let identifier: String
        switch request.identifier {
        case .email(let email)?: identifier = email.trimmingCharacters(in: .whitespaces)
        case .username(let username)?: identifier = username.trimmingCharacters(in: .whitespaces)
        case nil: identifier = ""
        }
        if identifier.isEmpty { rules.reject("identifier", "an email or a username is required") }
        rules.required(request.password, field: "password")
        let device = rules.device(request.device, field: "device")
        try rules.check()

        let account: UserRecord?
        if case .email? = request.identifier {
            account = try await store.user(email: identifier)
        } else {
            account = try await store.user(username: identifier)
        }
        // Unknown accounts are counted under their identifier, so they are throttled exactly like real ones.
        let accountKey = ThrottleKey(
            .loginAccount, account?.id.lowercasedString ?? "unknown:\(identifier.lowercased())")
        let address = core.clientAddress(context)
        let addressKey = ThrottleKey(.loginAddress, address)
        try await store.checkThrottle([accountKey, addressKey], now: core.clock.now())

        // Always one bcrypt: against a dummy hash when there is no account or no password, so the answer takes as
        // long and says the same either way.
        let matches = try await core.hasher.verify(request.password, against: account?.passwordHash)
        guard matches, let account else {
            try await store.recordAttempt(accountKey, policy: settings.loginAccountThrottle, now: core.clock.now())
            try await store.recordAttempt(addressKey, policy: settings.loginAddressThrottle, now: core.clock.now())
            throw AuthError.invalidCredentials
        }
        try await store.resetThrottle(accountKey)
        var response = Habitflow_Auth_V1_LoginResponse()
        response.tokens = try await core.openSession(userID: account.id, device: device, clientAddress: address)
        response.user = Habitflow_Auth_V1_User(account)
        return response
    }

    func refresh(request: Habitflow_Auth_V1_RefreshRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_RefreshResponse
    {
        guard !request.refreshToken.isEmpty else {
            throw RPCError.invalidArgument(field: "refresh_token", "is required")
        }
        let key = try await core.keyRing.signingKey()
        let now = core.clock.now()
        switch try await store.rotateRefreshToken(
            presented: request.refreshToken, now: now, lifetime: settings.refreshTokenLifetime)
        {
        case .rotated(let session, let refreshToken, let expiresAt):
            var response = Habitflow_Auth_V1_RefreshResponse()
            response.tokens = Habitflow_Auth_V1_AuthTokens(
                try settings.issueTokens(
                    for: session, refreshToken: refreshToken, refreshExpiresAt: expiresAt, key: key, now: now))
            return response
        case .reused:
            core.logger.warning("a used refresh token was presented again; its session is revoked")
            throw AuthError.refreshTokenReused
        case .invalid:
            throw AuthError.refreshTokenInvalid
        }
    }

    // MARK: - Sessions

    func logout(request: Habitflow_Auth_V1_LogoutRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LogoutResponse
    {
        let caller = try core.requireSignedIn()
        try await store.revokeSession(
            id: caller.sessionID, userID: caller.userID, reason: .logout, now: core.clock.now())
        return Habitflow_Auth_V1_LogoutResponse()
    }

    func logoutEverywhere(request: Habitflow_Auth_V1_LogoutEverywhereRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LogoutEverywhereResponse
    {
        let caller = try core.requireSignedIn()
        var response = Habitflow_Auth_V1_LogoutEverywhereResponse()
        response.revokedSessionCount = Int32(
            try await store.revokeSessions(
                userID: caller.userID, keeping: request.keepCurrentSession ? caller.sessionID : nil,
                reason: .logoutEverywhere, now: core.clock.now()))
        return response
    }

    func listSessions(request: Habitflow_Auth_V1_ListSessionsRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_ListSessionsResponse
    {
        let caller = try core.requireSignedIn()
        var validator = RequestValidator()
        let pageSize = validator.pageSize(request.pageSize, rule: .standard)
        var after: UUID?
        if let token = validator.pageToken(request.pageToken, list: "sessions", fieldCount: 1) {
            after = UUID(canonical: token[0])
            if after == nil { validator.reject("page_token", "is not a token this list returned") }
        }
        try validator.check()
        let sessions = try await store.liveSessions(
            userID: caller.userID, now: core.clock.now(), after: after, limit: pageSize + 1)
        var response = Habitflow_Auth_V1_ListSessionsResponse()
        response.sessions = sessions.prefix(pageSize).map {
            Habitflow_Auth_V1_Session($0, current: $0.id == caller.sessionID)
        }
        if sessions.count > pageSize, let last = sessions.prefix(pageSize).last {
            response.nextPageToken = PageToken.encode(list: "sessions", [last.id.lowercasedString])
        }
        return response
    }

    func revokeSession(request: Habitflow_Auth_V1_RevokeSessionRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_RevokeSessionResponse
    {
        let caller = try core.requireSignedIn()
        var rules = RequestValidator()
        let sessionID = rules.uuid(request.sessionID, field: "session_id")
        try rules.check()
        guard let sessionID else { return Habitflow_Auth_V1_RevokeSessionResponse() }
        let revoked = try await store.revokeSession(
            id: sessionID, userID: caller.userID, reason: .revoked, now: core.clock.now())
        // Revoking an ended session again is fine (idempotent); a session of someone else does not exist for us.
        if !revoked, try await store.session(id: sessionID, userID: caller.userID) == nil {
            throw AuthError.sessionNotFound(sessionID)
        }
        return Habitflow_Auth_V1_RevokeSessionResponse()
    }

    // MARK: - Profile

    func getProfile(request: Habitflow_Auth_V1_GetProfileRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_User
    {
        let userID = try CallerIdentity.requireUser()
        return Habitflow_Auth_V1_User(try await store.requireUser(userID))
    }

    func updateProfile(request: Habitflow_Auth_V1_UpdateProfileRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_User
    {
        let userID = try CallerIdentity.requireUser()
        let fields = try ProfileMask(request)
        var rules = RequestValidator()
        var change = ProfileChange()
        if fields.username { change.username = rules.username(request.user.username, field: "user.username") }
        if fields.displayName {
            change.displayName = rules.displayName(request.user.displayName, field: "user.display_name")
        }
        if fields.timeZone { change.timeZone = rules.timeZone(request.user.timeZone, field: "user.time_zone") }
        try rules.check()
        return Habitflow_Auth_V1_User(
            try await store.updateProfile(userID: userID, change: change, now: core.clock.now()))
    }

    // MARK: - Passwords

    func changePassword(request: Habitflow_Auth_V1_ChangePasswordRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_ChangePasswordResponse
    {
        let caller = try core.requireSignedIn()
        let user = try await store.requireUser(caller.userID)
        var rules = RequestValidator()
        rules.required(request.currentPassword, field: "current_password")
        rules.password(request.newPassword, field: "new_password", email: user.email)
        try rules.check()
        guard user.passwordHash != nil else { throw AuthError.noPassword }
        try await core.requirePassword(request.currentPassword, of: user, field: "current_password")
        let hash = try await core.hasher.hash(request.newPassword)
        try await store.changePassword(
            userID: user.id, hash: hash, keeping: caller.sessionID, now: core.clock.now())
        return Habitflow_Auth_V1_ChangePasswordResponse()
    }

    func requestPasswordReset(request: Habitflow_Auth_V1_RequestPasswordResetRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_RequestPasswordResetResponse
    {
        var rules = RequestValidator()
        let email = rules.email(request.email, field: "email")
        try rules.check()
        // Every request counts, for known and unknown addresses alike: the limit reveals nothing.
        let emailKey = ThrottleKey(.resetEmail, email.lowercased())
        let addressKey = ThrottleKey(.resetAddress, core.clientAddress(context))
        try await store.checkThrottle([emailKey, addressKey], now: core.clock.now())
        try await store.recordAttempt(emailKey, policy: settings.resetEmailThrottle, now: core.clock.now())
        try await store.recordAttempt(addressKey, policy: settings.resetAddressThrottle, now: core.clock.now())

        let queued = try await store.requestPasswordReset(
            email: email, lifetime: settings.passwordResetTokenLifetime, linkBaseURL: settings.linkBaseURL,
            now: core.clock.now())
        if queued { core.mail.wake() }
        return Habitflow_Auth_V1_RequestPasswordResetResponse()
    }

    func confirmPasswordReset(request: Habitflow_Auth_V1_ConfirmPasswordResetRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_ConfirmPasswordResetResponse
    {
        var rules = RequestValidator()
        rules.required(request.token, field: "token")
        rules.password(request.newPassword, field: "new_password", email: nil)
        try rules.check()
        // Look first (hash outside the transaction), use up the token only with the new hash in hand.
        guard
            let pending = try await store.pendingToken(
                presented: request.token, purpose: .passwordReset, now: core.clock.now()),
            let user = try await store.user(id: pending.userID)
        else { throw AuthError.invalidToken }
        rules.password(request.newPassword, field: "new_password", email: user.email)
        try rules.check()
        let hash = try await core.hasher.hash(request.newPassword)
        try await store.resetPassword(token: request.token, userID: user.id, hash: hash, now: core.clock.now())
        try await store.resetThrottle(ThrottleKey(.loginAccount, user.id.lowercasedString))
        return Habitflow_Auth_V1_ConfirmPasswordResetResponse()
    }

    // MARK: - Email change

    func requestEmailChange(request: Habitflow_Auth_V1_RequestEmailChangeRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_RequestEmailChangeResponse
    {
        let userID = try CallerIdentity.requireUser()
        var rules = RequestValidator()
        let newEmail = rules.email(request.newEmail, field: "new_email")
        try rules.check()
        let user = try await store.requireUser(userID)
        if newEmail.lowercased() == user.email.lowercased() { throw AuthError.emailUnchanged }
        if user.passwordHash != nil {
            try await core.requirePassword(request.password, of: user, field: "password")
        }
        if try await store.user(email: newEmail) != nil { throw AuthError.emailInUse }
        try await store.requestEmailChange(
            user: user, newEmail: newEmail, lifetime: settings.emailChangeTokenLifetime,
            linkBaseURL: settings.linkBaseURL, now: core.clock.now())
        core.mail.wake()
        return Habitflow_Auth_V1_RequestEmailChangeResponse()
    }

    func confirmEmailChange(request: Habitflow_Auth_V1_ConfirmEmailChangeRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_ConfirmEmailChangeResponse
    {
        guard !request.token.isEmpty else { throw RPCError.invalidArgument(field: "token", "is required") }
        let user = try await store.confirmEmailChange(token: request.token, now: core.clock.now())
        core.mail.wake()
        var response = Habitflow_Auth_V1_ConfirmEmailChangeResponse()
        response.user = Habitflow_Auth_V1_User(user)
        return response
    }

    // MARK: - Account deletion and social login

    func deleteAccount(request: Habitflow_Auth_V1_DeleteAccountRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_DeleteAccountResponse
    {
        let userID = try CallerIdentity.requireUser()
        let user = try await store.requireUser(userID)
        if user.passwordHash != nil {
            try await core.requirePassword(request.password, of: user, field: "password")
        } else {
            // No password to re-enter: a fresh ID token of a linked provider proves it is the owner.
            guard request.hasSocialCredential else { throw AuthError.socialCredentialRequired }
            let identity = try await verify(request.socialCredential, field: "social_credential")
            guard try await store.hasIdentity(userID: user.id, provider: identity.provider, subject: identity.subject)
            else { throw AuthError.identityNotLinked }
        }
        try await store.deleteAccount(userID: user.id, now: core.clock.now())
        return Habitflow_Auth_V1_DeleteAccountResponse()
    }

    func socialLogin(request: Habitflow_Auth_V1_SocialLoginRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_SocialLoginResponse
    {
        var rules = RequestValidator()
        let device = rules.device(request.device, field: "device")
        let timeZone = rules.timeZone(request.timeZone, field: "time_zone")
        if !request.hasCredential { rules.reject("credential", "is required") }
        try rules.check()
        let identity = try await verify(request.credential, field: "credential")
        let (user, created) = try await store.signIn(
            identity: identity, email: RequestValidator.vouchedEmail(of: identity), timeZone: timeZone,
            now: core.clock.now())
        var response = Habitflow_Auth_V1_SocialLoginResponse()
        response.tokens = try await core.openSession(
            userID: user.id, device: device, clientAddress: core.clientAddress(context))
        response.user = Habitflow_Auth_V1_User(user)
        response.created = created
        return response
    }

    /// Checks a social credential's fields, then its ID token with the provider's keys.
    private func verify(_ credential: Habitflow_Auth_V1_SocialCredential, field: String) async throws
        -> VerifiedIdentity
    {
        let provider = try RequestValidator.socialCredential(credential, field: field)
        return try await core.social.verify(
            credential.idToken, provider: provider, nonce: credential.nonce, field: field)
    }
}
