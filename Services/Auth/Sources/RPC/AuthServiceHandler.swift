internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowEvents
internal import HabitFlowPostgres
internal import HabitFlowRPC
internal import HabitFlowServiceKit
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// `habitflow.auth.v1.AuthService`: the public API, reached through the gateway.
struct AuthServiceHandler: Habitflow_Auth_V1_AuthService.Handler {
    let core: AuthCore

    private var settings: AuthSettings { core.settings }
    private var pool: PostgresPool { core.pool }

    // MARK: - Register and sign in

    func register(request: Habitflow_Auth_V1_RegisterRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_RegisterResponse
    {
        var rules = FieldRules()
        let email = rules.email(request.email, field: "email")
        let username = rules.username(request.username, field: "username")
        rules.password(request.password, field: "password", email: email)
        let timeZone = rules.timeZone(request.timeZone, field: "time_zone")
        let displayName = rules.displayName(request.displayName, field: "display_name")
        let device = rules.device(request.device, field: "device")
        try rules.throwIfInvalid()

        // Refuse a taken email or username before spending a bcrypt on it; the unique indexes catch races.
        if try await UserStore.user(email: email, on: pool) != nil {
            throw UserStore.emailInUse
        }
        if try await UserStore.usernameTaken(username, on: pool) {
            throw UserStore.usernameInUse
        }
        let hash = try await core.hasher.hash(request.password)
        let key = try await core.keyRing.signingKey()
        let now = core.clock.now()
        let user = UserRecord(
            id: UUID.random(), email: email, emailVerified: false, username: username,
            displayName: displayName.isEmpty ? username : displayName, timeZone: timeZone, passwordHash: hash,
            createdAt: now, updatedAt: now)
        let (stored, tokens) = try await pool.transaction { transaction in
            try await UserStore.insert(user, on: transaction)
            try await core.appendUserEvent(core.userCreatedEvent(user), userID: user.id, on: transaction)
            let tokens = try await core.openSession(
                userID: user.id, device: device, clientAddress: core.clientAddress(context), key: key, now: now,
                on: transaction)
            // As stored (timestamps at the database's precision), so it equals what GetProfile returns later.
            return (try await core.requireUser(user.id, on: transaction), tokens)
        }
        var response = Habitflow_Auth_V1_RegisterResponse()
        response.user = Habitflow_Auth_V1_User(stored)
        response.tokens = tokens
        return response
    }

    func login(request: Habitflow_Auth_V1_LoginRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LoginResponse
    {
        var rules = FieldRules()
        let identifier: String
        switch request.identifier {
        case .email(let email)?: identifier = email.trimmingCharacters(in: .whitespaces)
        case .username(let username)?: identifier = username.trimmingCharacters(in: .whitespaces)
        case nil: identifier = ""
        }
        if identifier.isEmpty { rules.fail("identifier", "an email or a username is required") }
        rules.required(request.password, field: "password")
        let device = rules.device(request.device, field: "device")
        try rules.throwIfInvalid()

        let account: UserRecord?
        if case .email? = request.identifier {
            account = try await UserStore.user(email: identifier, on: pool)
        } else {
            account = try await UserStore.user(username: identifier, on: pool)
        }
        // Unknown accounts are counted under their identifier, so they are throttled exactly like real ones.
        let accountKey = ThrottleKey(
            .loginAccount, account?.id.lowercasedString ?? "unknown:\(identifier.lowercased())")
        let address = core.clientAddress(context)
        let addressKey = ThrottleKey(.loginAddress, address)
        try await core.throttle.check([accountKey, addressKey])

        // Always one bcrypt: against a dummy hash when there is no account or no password, so the answer takes as
        // long and says the same either way.
        let matches = try await core.hasher.verify(request.password, against: account?.passwordHash)
        guard matches, let account else {
            try await core.throttle.record(accountKey, policy: settings.loginAccountThrottle)
            try await core.throttle.record(addressKey, policy: settings.loginAddressThrottle)
            throw RPCError.unauthenticated(reason: "INVALID_CREDENTIALS", "wrong email, username or password")
        }
        try await core.throttle.reset(accountKey)
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
        // The transaction commits in every outcome: a reused token's session stays revoked although the call fails.
        let outcome = try await pool.transaction { transaction in
            try await SessionStore.rotate(
                presented: request.refreshToken, now: now, lifetime: settings.refreshTokenLifetime, on: transaction)
        }
        switch outcome {
        case .rotated(let session, let refreshToken, let expiresAt):
            var response = Habitflow_Auth_V1_RefreshResponse()
            response.tokens = try core.tokens(
                for: session, refreshToken: refreshToken, refreshExpiresAt: expiresAt, key: key, now: now)
            return response
        case .reused:
            core.logger.warning("a used refresh token was presented again; its session is revoked")
            throw RPCError.unauthenticated(
                reason: "REFRESH_TOKEN_REUSED", "this refresh token was already used; the session has been signed out")
        case .invalid:
            throw RPCError.unauthenticated(reason: "REFRESH_TOKEN_INVALID", "the refresh token is invalid or expired")
        }
    }

    // MARK: - Sessions

    func logout(request: Habitflow_Auth_V1_LogoutRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LogoutResponse
    {
        let caller = try core.requireSignedIn()
        try await SessionStore.revoke(
            sessionID: caller.sessionID, userID: caller.userID, reason: .logout, now: core.clock.now(), on: pool)
        return Habitflow_Auth_V1_LogoutResponse()
    }

    func logoutEverywhere(request: Habitflow_Auth_V1_LogoutEverywhereRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_LogoutEverywhereResponse
    {
        let caller = try core.requireSignedIn()
        var response = Habitflow_Auth_V1_LogoutEverywhereResponse()
        response.revokedSessionCount = Int32(
            try await SessionStore.revokeAll(
                userID: caller.userID, keeping: request.keepCurrentSession ? caller.sessionID : nil,
                reason: .logoutEverywhere, now: core.clock.now(), on: pool))
        return response
    }

    func listSessions(request: Habitflow_Auth_V1_ListSessionsRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_ListSessionsResponse
    {
        let caller = try core.requireSignedIn()
        let pageSize = try PageToken.pageSize(request.pageSize)
        let after = try PageToken.decode(request.pageToken)
        let sessions = try await SessionStore.liveSessions(
            userID: caller.userID, now: core.clock.now(), after: after, limit: pageSize + 1, on: pool)
        var response = Habitflow_Auth_V1_ListSessionsResponse()
        response.sessions = sessions.prefix(pageSize).map {
            Habitflow_Auth_V1_Session($0, current: $0.id == caller.sessionID)
        }
        if sessions.count > pageSize, let last = sessions.prefix(pageSize).last {
            response.nextPageToken = PageToken.encode(last.id)
        }
        return response
    }

    func revokeSession(request: Habitflow_Auth_V1_RevokeSessionRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_RevokeSessionResponse
    {
        let caller = try core.requireSignedIn()
        var rules = FieldRules()
        let sessionID = rules.uuid(request.sessionID, field: "session_id")
        try rules.throwIfInvalid()
        guard let sessionID else { return Habitflow_Auth_V1_RevokeSessionResponse() }
        let revoked = try await SessionStore.revoke(
            sessionID: sessionID, userID: caller.userID, reason: .revoked, now: core.clock.now(), on: pool)
        // Revoking an ended session again is fine (idempotent); a session of someone else does not exist for us.
        if !revoked, try await SessionStore.session(id: sessionID, userID: caller.userID, on: pool) == nil {
            throw RPCError.notFound(resourceType: "session", name: sessionID.lowercasedString)
        }
        return Habitflow_Auth_V1_RevokeSessionResponse()
    }

    // MARK: - Profile

    func getProfile(request: Habitflow_Auth_V1_GetProfileRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_User
    {
        let userID = try CallerIdentity.requireUser()
        return Habitflow_Auth_V1_User(try await core.requireUser(userID, on: pool))
    }

    func updateProfile(request: Habitflow_Auth_V1_UpdateProfileRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_User
    {
        let userID = try CallerIdentity.requireUser()
        let fields = try ProfileMask(request)
        var rules = FieldRules()
        let username = fields.username ? rules.username(request.user.username, field: "user.username") : nil
        let displayName =
            fields.displayName ? rules.displayName(request.user.displayName, field: "user.display_name") : nil
        let timeZone = fields.timeZone ? rules.timeZone(request.user.timeZone, field: "user.time_zone") : nil
        try rules.throwIfInvalid()

        let updated = try await pool.transaction { transaction -> UserRecord in
            guard let current = try await UserStore.lockedUser(id: userID, on: transaction) else {
                throw RPCError.notFound(resourceType: "user", name: userID.lowercasedString)
            }
            var next = current
            if let username { next.username = username }
            // An empty display name falls back to the username, as at registration.
            if let displayName { next.displayName = displayName.isEmpty ? next.username : displayName }
            if let timeZone { next.timeZone = timeZone }
            guard
                next.username != current.username || next.displayName != current.displayName
                    || next.timeZone != current.timeZone
            else { return current }
            next.updatedAt = core.clock.now()
            try await UserStore.updateProfile(
                id: userID, username: next.username, displayName: next.displayName, timeZone: next.timeZone,
                updatedAt: next.updatedAt, on: transaction)
            var event = Habitflow_Events_V1_UserUpdated()
            event.userID = userID.lowercasedString
            event.username = next.username
            event.displayName = next.displayName
            event.timeZone = next.timeZone
            event.updatedAt = Google_Protobuf_Timestamp(date: next.updatedAt)
            try await core.appendUserEvent(event, userID: userID, on: transaction)
            return try await core.requireUser(userID, on: transaction)
        }
        return Habitflow_Auth_V1_User(updated)
    }

    // MARK: - Passwords

    func changePassword(request: Habitflow_Auth_V1_ChangePasswordRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_ChangePasswordResponse
    {
        let caller = try core.requireSignedIn()
        let user = try await core.requireUser(caller.userID, on: pool)
        var rules = FieldRules()
        rules.required(request.currentPassword, field: "current_password")
        rules.password(request.newPassword, field: "new_password", email: user.email)
        try rules.throwIfInvalid()
        guard user.passwordHash != nil else {
            throw RPCError.failedPrecondition(
                type: "NO_PASSWORD", subject: "user", "the account has no password yet; set one with a password reset")
        }
        try await core.requirePassword(request.currentPassword, of: user, field: "current_password")
        let hash = try await core.hasher.hash(request.newPassword)
        let now = core.clock.now()
        try await pool.transaction { transaction in
            try await UserStore.setPassword(id: user.id, hash: hash, updatedAt: now, on: transaction)
            // Whoever knew the old password is signed out everywhere but here.
            try await SessionStore.revokeAll(
                userID: user.id, keeping: caller.sessionID, reason: .passwordChanged, now: now, on: transaction)
        }
        return Habitflow_Auth_V1_ChangePasswordResponse()
    }

    func requestPasswordReset(request: Habitflow_Auth_V1_RequestPasswordResetRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_RequestPasswordResetResponse
    {
        var rules = FieldRules()
        let email = rules.email(request.email, field: "email")
        try rules.throwIfInvalid()
        // Every request counts, for known and unknown addresses alike: the limit reveals nothing.
        let emailKey = ThrottleKey(.resetEmail, email.lowercased())
        let addressKey = ThrottleKey(.resetAddress, core.clientAddress(context))
        try await core.throttle.check([emailKey, addressKey])
        try await core.throttle.record(emailKey, policy: settings.resetEmailThrottle)
        try await core.throttle.record(addressKey, policy: settings.resetAddressThrottle)

        let now = core.clock.now()
        let queued = try await pool.transaction { transaction -> Bool in
            guard let user = try await UserStore.user(email: email, on: transaction) else { return false }
            let token = try await OneTimeTokenStore.issue(
                userID: user.id, purpose: .passwordReset, now: now, lifetime: settings.passwordResetTokenLifetime,
                on: transaction)
            try await core.enqueueTokenMail(
                to: user.email, subject: "Reset your HabitFlow password",
                intro: "Someone (hopefully you) asked to reset the password of your HabitFlow account.",
                path: "reset-password", token: token, validity: "1 hour", userID: user.id, now: now, on: transaction)
            return true
        }
        if queued { core.mail.wake() }
        return Habitflow_Auth_V1_RequestPasswordResetResponse()
    }

    func confirmPasswordReset(request: Habitflow_Auth_V1_ConfirmPasswordResetRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_ConfirmPasswordResetResponse
    {
        var rules = FieldRules()
        rules.required(request.token, field: "token")
        rules.password(request.newPassword, field: "new_password", email: nil)
        try rules.throwIfInvalid()
        // Look first (hash outside the transaction), use up the token only with the new hash in hand.
        guard
            let pending = try await OneTimeTokenStore.peek(
                presented: request.token, purpose: .passwordReset, now: core.clock.now(), on: pool),
            let user = try await UserStore.user(id: pending.userID, on: pool)
        else { throw Self.invalidToken }
        rules.password(request.newPassword, field: "new_password", email: user.email)
        try rules.throwIfInvalid()
        let hash = try await core.hasher.hash(request.newPassword)
        let now = core.clock.now()
        try await pool.transaction { transaction in
            guard
                let used = try await OneTimeTokenStore.consume(
                    presented: request.token, purpose: .passwordReset, now: now, on: transaction),
                used.userID == user.id
            else { throw Self.invalidToken }
            // The mail reached the owner of the address: it is verified, and every session ends.
            try await UserStore.setPassword(
                id: user.id, hash: hash, verifiedEmail: true, updatedAt: now, on: transaction)
            try await SessionStore.revokeAll(userID: user.id, reason: .passwordReset, now: now, on: transaction)
        }
        try await core.throttle.reset(ThrottleKey(.loginAccount, user.id.lowercasedString))
        return Habitflow_Auth_V1_ConfirmPasswordResetResponse()
    }

    static let invalidToken = RPCError.invalidArgument(field: "token", "is invalid, expired or already used")

    // MARK: - Email change

    func requestEmailChange(request: Habitflow_Auth_V1_RequestEmailChangeRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_RequestEmailChangeResponse
    {
        let userID = try CallerIdentity.requireUser()
        var rules = FieldRules()
        let newEmail = rules.email(request.newEmail, field: "new_email")
        try rules.throwIfInvalid()
        let user = try await core.requireUser(userID, on: pool)
        if newEmail.lowercased() == user.email.lowercased() {
            throw RPCError.invalidArgument(field: "new_email", "is already the account's email")
        }
        if user.passwordHash != nil {
            try await core.requirePassword(request.password, of: user, field: "password")
        }
        if try await UserStore.user(email: newEmail, on: pool) != nil { throw UserStore.emailInUse }
        let now = core.clock.now()
        try await pool.transaction { transaction in
            let token = try await OneTimeTokenStore.issue(
                userID: user.id, purpose: .emailChange, newEmail: newEmail, now: now,
                lifetime: settings.emailChangeTokenLifetime, on: transaction)
            // To the new address: using the token proves it reaches the account's owner.
            try await core.enqueueTokenMail(
                to: newEmail, subject: "Confirm your new HabitFlow email",
                intro: "Confirm that this address should become the email of the HabitFlow account \(user.username).",
                path: "confirm-email", token: token, validity: "24 hours", userID: user.id, now: now, on: transaction)
        }
        core.mail.wake()
        return Habitflow_Auth_V1_RequestEmailChangeResponse()
    }

    func confirmEmailChange(request: Habitflow_Auth_V1_ConfirmEmailChangeRequest, context: ServerContext)
        async throws -> Habitflow_Auth_V1_ConfirmEmailChangeResponse
    {
        guard !request.token.isEmpty else { throw RPCError.invalidArgument(field: "token", "is required") }
        let now = core.clock.now()
        let user = try await pool.transaction { transaction -> UserRecord in
            guard
                let used = try await OneTimeTokenStore.consume(
                    presented: request.token, purpose: .emailChange, now: now, on: transaction),
                let newEmail = used.newEmail,
                let previous = try await UserStore.lockedUser(id: used.userID, on: transaction)
            else { throw Self.invalidToken }
            try await UserStore.setEmail(id: previous.id, email: newEmail, updatedAt: now, on: transaction)
            // Tell the old address, so an unwanted change does not go unnoticed.
            try await MailOutboxStore.enqueue(
                to: previous.email, subject: "Your HabitFlow email was changed",
                body: """
                    The email of your HabitFlow account \(previous.username) is now \(newEmail).
                    If you did not do this, reset your password and contact support.
                    """,
                userID: previous.id, now: now, on: transaction)
            guard let updated = try await UserStore.user(id: previous.id, on: transaction) else {
                throw AuthInvariantFailure("the account vanished while its email changed")
            }
            return updated
        }
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
        let user = try await core.requireUser(userID, on: pool)
        if user.passwordHash != nil {
            try await core.requirePassword(request.password, of: user, field: "password")
        } else {
            // No password to re-enter: a fresh ID token of a linked provider proves it is the owner.
            guard request.hasSocialCredential else {
                throw RPCError.invalidArgument(
                    field: "social_credential", "is required for an account without a password")
            }
            let claims = try await core.social.verify(request.socialCredential, field: "social_credential")
            guard
                try await UserStore.hasIdentity(
                    userID: user.id, provider: claims.provider.rawValue, subject: claims.subject, on: pool)
            else {
                throw RPCError.permissionDenied(
                    reason: "IDENTITY_NOT_LINKED", "the ID token is not of an identity linked to this account")
            }
        }
        let now = core.clock.now()
        try await pool.transaction { transaction in
            guard try await UserStore.delete(id: user.id, on: transaction) else {
                throw RPCError.notFound(resourceType: "user", name: user.id.lowercasedString)
            }
            var event = Habitflow_Events_V1_UserDeleted()
            event.userID = user.id.lowercasedString
            event.deletedAt = Google_Protobuf_Timestamp(date: now)
            try await core.appendUserEvent(event, userID: user.id, on: transaction)
        }
        return Habitflow_Auth_V1_DeleteAccountResponse()
    }

    func socialLogin(request: Habitflow_Auth_V1_SocialLoginRequest, context: ServerContext) async throws
        -> Habitflow_Auth_V1_SocialLoginResponse
    {
        var rules = FieldRules()
        let device = rules.device(request.device, field: "device")
        let timeZone = rules.timeZone(request.timeZone, field: "time_zone")
        if !request.hasCredential { rules.fail("credential", "is required") }
        try rules.throwIfInvalid()
        let claims = try await core.social.verify(request.credential, field: "credential")
        let (user, created) = try await core.social.signIn(claims, timeZone: timeZone, core: core)
        var response = Habitflow_Auth_V1_SocialLoginResponse()
        response.tokens = try await core.openSession(
            userID: user.id, device: device, clientAddress: core.clientAddress(context))
        response.user = Habitflow_Auth_V1_User(user)
        response.created = created
        return response
    }
}

/// Which profile fields an UpdateProfile changes: the mask's paths, or without a mask the fields that are set.
struct ProfileMask {
    var username = false
    var displayName = false
    var timeZone = false

    init(_ request: Habitflow_Auth_V1_UpdateProfileRequest) throws {
        guard request.hasUpdateMask else {
            username = !request.user.username.isEmpty
            displayName = !request.user.displayName.isEmpty
            timeZone = !request.user.timeZone.isEmpty
            guard username || displayName || timeZone else {
                throw RPCError.invalidArgument(field: "update_mask", "name at least one field to update")
            }
            return
        }
        var violations: [FieldViolation] = []
        for path in request.updateMask.paths {
            switch path {
            case "username": username = true
            case "display_name": displayName = true
            case "time_zone": timeZone = true
            default:
                violations.append(
                    FieldViolation(
                        field: "update_mask",
                        description: "\"\(path)\" cannot be updated (username, display_name, time_zone can)"))
            }
        }
        if request.updateMask.paths.isEmpty {
            violations.append(FieldViolation(field: "update_mask", description: "name at least one field to update"))
        }
        if !violations.isEmpty { throw RPCError.invalidArgument(violations) }
    }
}

/// Page tokens of ListSessions: the last session id of the page, base64url, opaque to clients.
enum PageToken {
    static let defaultPageSize = 50
    static let maximumPageSize = 100

    static func pageSize(_ requested: Int32) throws -> Int {
        guard requested >= 0 else { throw RPCError.invalidArgument(field: "page_size", "must not be negative") }
        return requested == 0 ? defaultPageSize : min(Int(requested), maximumPageSize)
    }

    static func encode(_ id: UUID) -> String {
        Data(id.lowercasedString.utf8).base64EncodedString()
    }

    static func decode(_ token: String) throws -> UUID? {
        guard !token.isEmpty else { return nil }
        guard let data = Data(base64Encoded: token), let id = UUID(canonical: String(decoding: data, as: UTF8.self))
        else { throw RPCError.invalidArgument(field: "page_token", "is not a token from a previous page") }
        return id
    }
}
