internal import Foundation
internal import HabitFlowRPC
internal import HabitFlowTokens
internal import HabitFlowLocking
internal import HabitFlowCrypto
internal import Logging

/// The signed-in user a client call acts for: what the access token says, after the gateway checked it.
struct AuthenticatedCaller: Sendable, Hashable {
    let userID: UUID
    let sessionID: String
    /// `userID` as every log line and credential writes it, made once per verified token rather than per call.
    let userIDString: String

    init(userID: UUID, sessionID: String) {
        self.userID = userID
        self.sessionID = sessionID
        self.userIDString = userID.lowercasedString
    }
}

/// Turns `authorization: Bearer <access token>` into an ``AuthenticatedCaller``: the token is verified locally (its
/// Ed25519 signature with auth's published keys, issuer, audience, expiry), then its session is checked with auth
/// (cached for a few seconds), so tokens of revoked sessions and deleted accounts stop working within seconds.
final class Authenticator: Sendable {
    private let keys: AccessTokenKeys
    private let sessions: SessionChecker
    private let verified: VerifiedTokens

    init(keys: AccessTokenKeys, sessions: SessionChecker, verifiedTokenLifetime: Duration = .seconds(60)) {
        self.keys = keys
        self.sessions = sessions
        self.verified = VerifiedTokens(lifetime: verifiedTokenLifetime)
    }

    func authenticate(_ metadata: Metadata, now: Date = Date()) async throws(RPCError) -> AuthenticatedCaller {
        guard let token = Self.bearerToken(in: metadata) else {
            throw RPCError.unauthenticated(
                reason: "TOKEN_MISSING", "this call needs the metadata `authorization: Bearer <access token>`")
        }
        let caller: AuthenticatedCaller
        if let known = verified.caller(for: token, now: now) {
            caller = known
        } else {
            caller = try await verify(token, now: now)
        }
        try await sessions.requireActive(caller)
        return caller
    }

    /// The caller, when the caches alone show a valid token of an active session: what a call admitted without
    /// waiting needs (`nil`: ``authenticate(_:now:)`` has to decide, and may have to wait).
    func cachedActiveCaller(_ metadata: Metadata, now: Date = Date()) -> AuthenticatedCaller? {
        guard let token = Self.bearerToken(in: metadata), let caller = verified.caller(for: token, now: now),
            sessions.knownState(of: caller) == .active
        else { return nil }
        return caller
    }

    /// The caller a token names, once its signature and claims check out (remembered, see ``VerifiedTokens``).
    private func verify(_ token: String, now: Date) async throws(RPCError) -> AuthenticatedCaller {
        var verifier = try await keys.current()
        let claims: AccessTokenClaims
        do {
            claims = try verifier.verify(token, now: now)
        } catch .unknownKey(let keyID) {
            // Auth may have rotated its signing key since we fetched: fetch again (rate-limited) and retry once.
            guard let refreshed = try await keys.refreshAfterUnknownKey() else {
                throw Self.refusal(.unknownKey(keyID))
            }
            verifier = refreshed
            do {
                claims = try verifier.verify(token, now: now)
            } catch {
                throw Self.refusal(error)
            }
        } catch {
            throw Self.refusal(error)
        }
        guard let userID = UUID(canonical: claims.subject) else {
            throw RPCError.unauthenticated(reason: "TOKEN_INVALID", "the access token's subject is not a user id")
        }
        let caller = AuthenticatedCaller(userID: userID, sessionID: claims.sessionID)
        verified.remember(token, caller: caller, expiresAt: claims.expiresAt.addingTimeInterval(verifier.leeway.timeInterval), now: now)
        return caller
    }

    /// The token of `authorization: Bearer <token>` (the scheme is case-insensitive, RFC 6750). Works on the UTF-8
    /// bytes: it runs on every call, and Foundation's trimming was a sizeable share of the gateway's CPU time.
    static func bearerToken(in metadata: Metadata) -> String? {
        guard let value = metadata["authorization"] else { return nil }
        let bytes = value.utf8
        let space = UInt8(ascii: " ")
        var start = bytes.startIndex
        while start != bytes.endIndex, bytes[start] == space { start = bytes.index(after: start) }
        var index = start
        for expected in "bearer".utf8 {
            // ASCII letters: setting bit 5 lower-cases them.
            guard index != bytes.endIndex, bytes[index] | 0x20 == expected else { return nil }
            index = bytes.index(after: index)
        }
        guard index != bytes.endIndex, bytes[index] == space else { return nil }
        while index != bytes.endIndex, bytes[index] == space { index = bytes.index(after: index) }
        var end = bytes.endIndex
        while end != index, bytes[bytes.index(before: end)] == space { end = bytes.index(before: end) }
        return index == end ? nil : String(Substring(bytes[index..<end]))
    }

    private static func refusal(_ error: TokenError) -> RPCError {
        switch error {
        case .expired:
            RPCError.unauthenticated(reason: "TOKEN_EXPIRED", "the access token has expired; refresh it")
        default:
            // TokenError descriptions never contain the token.
            RPCError.unauthenticated(reason: "TOKEN_INVALID", "the access token is not valid: \(error)")
        }
    }
}

/// Tokens whose signature and claims were verified recently: a client sends the same access token with every call
/// for hours, and an Ed25519 verification plus a JSON decode per call is most of the gateway's own work. An entry lasts
/// until the token expires or `lifetime` passes (so a key auth retires stops being trusted within that time);
/// sessions are still checked on every call.
final class VerifiedTokens: Sendable {
    private struct Entry {
        var caller: AuthenticatedCaller
        var validUntil: Date
    }

    private let lifetime: TimeInterval
    private let capacity: Int
    private let entries = Locked<[String: Entry]>([:])

    init(lifetime: Duration, capacity: Int = 50_000) {
        self.lifetime = lifetime.timeInterval
        self.capacity = capacity
    }

    func caller(for token: String, now: Date) -> AuthenticatedCaller? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            guard entry.validUntil > now else {
                entries[token] = nil
                return nil
            }
            return entry.caller
        }
    }

    func remember(_ token: String, caller: AuthenticatedCaller, expiresAt: Date, now: Date) {
        let validUntil = min(expiresAt, now.addingTimeInterval(lifetime))
        guard validUntil > now else { return }
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { $0.value.validUntil > now }
                // Still full of live entries: start over rather than grow without bound.
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[token] = Entry(caller: caller, validUntil: validUntil)
        }
    }
}

/// The access-token verifier built from auth's published keys: fetched on first use, again every refresh interval,
/// and at once when a token names a key we do not know (at most once per `minimumRefetchInterval`, so tokens with
/// made-up key ids cannot make us hammer auth). One fetch at a time, whatever the number of waiting calls.
final class AccessTokenKeys: Sendable {
    typealias Fetch = @Sendable () async throws -> AccessTokenVerifier

    private struct State {
        var verifier: AccessTokenVerifier?
        var fetchedAt: ContinuousClock.Instant?
        var lastAttempt: ContinuousClock.Instant?
        var inFlight: Task<AccessTokenVerifier, any Error>?
    }

    private let fetch: Fetch
    private let refreshInterval: Duration
    private let minimumRefetchInterval: Duration
    private let state = Locked(State())

    init(refreshInterval: Duration, minimumRefetchInterval: Duration = .seconds(5), fetch: @escaping Fetch) {
        self.fetch = fetch
        self.refreshInterval = refreshInterval
        self.minimumRefetchInterval = minimumRefetchInterval
    }

    /// The current verifier. Keys past the refresh interval are fetched again; should that fail, the old ones stay
    /// in use (auth being down does not log everybody out). `UNAVAILABLE` when none could ever be fetched.
    func current() async throws(RPCError) -> AccessTokenVerifier {
        let (cached, fetchedAt) = state.withLock { ($0.verifier, $0.fetchedAt) }
        if let cached, let fetchedAt, ContinuousClock.now - fetchedAt < refreshInterval { return cached }
        do {
            return try await load()
        } catch {
            if let cached { return cached }
            throw RPCError(.unavailable, "cannot verify access tokens yet: the auth service's keys are unavailable")
        }
    }

    /// Fetches the keys again after a token named an unknown key; `nil` when they were fetched too recently to
    /// try again.
    func refreshAfterUnknownKey() async throws(RPCError) -> AccessTokenVerifier? {
        let recent = state.withLock { state in
            state.lastAttempt.map { ContinuousClock.now - $0 < minimumRefetchInterval } ?? false
        }
        guard !recent else { return nil }
        do {
            return try await load()
        } catch {
            return nil
        }
    }

    private func load() async throws -> AccessTokenVerifier {
        let fetch = self.fetch
        let task = state.withLock { state in
            if let inFlight = state.inFlight { return inFlight }
            state.lastAttempt = .now
            let task = Task { try await fetch() }
            state.inFlight = task
            return task
        }
        let result = await task.result
        state.withLock { state in
            guard state.inFlight == task else { return }
            state.inFlight = nil
            if case .success(let verifier) = result {
                state.verifier = verifier
                state.fetchedAt = .now
            }
        }
        return try result.get()
    }
}

/// Whether sessions may still be used, as auth says (`AuthInternal.CheckSession`), remembered for
/// `checkInterval`: so a revoked session or a deleted account is refused at most that long after the fact, while
/// a busy session costs auth one call per interval. Concurrent calls of one session share one check.
///
/// While auth's session-end notices are live (``noticesOpened(now:)`` to ``noticesEnded()``, fed by
/// ``follow(_:logger:)``), an answer is trusted for `pushedCheckInterval` instead: auth tells us at once when a user's
/// session ends (``sessionsEnded(of:now:)``), and that user's answers are asked again. Only answers asked after the
/// stream opened count, since ends sent while it was down are lost; so whenever it is down, the short interval holds.
final class SessionChecker: Sendable {
    enum SessionState: Sendable, Equatable {
        case active
        case revoked
        case expired
        case notFound
    }

    typealias Check = @Sendable (_ caller: AuthenticatedCaller) async throws -> SessionState

    /// The identity the notice subscription is signed with (services refuse `ChangeNotices` to a forwarded client
    /// call, signed `gateway`).
    static let caller = "gateway-sessions"

    private struct Entry {
        var state: SessionState
        var checkedAt: ContinuousClock.Instant
    }

    private struct State {
        var entries: [AuthenticatedCaller: Entry] = [:]
        var inFlight: [AuthenticatedCaller: Task<SessionState, any Error>] = [:]
        /// When the current notice stream opened (or last said `all_users`); nil while there is none.
        var noticesSince: ContinuousClock.Instant?
        /// When auth last said a session of the user ended, while the stream is open: older answers are asked again.
        var endedAt: [UUID: ContinuousClock.Instant] = [:]
    }

    private let check: Check
    private let checkInterval: Duration
    private let pushedCheckInterval: Duration
    private let grace: Duration
    private let maximumEntries: Int
    private let state = Locked(State())

    /// - Parameter pushedCheckInterval: how long an answer holds while session-end notices are live (nil: never
    ///   longer than `checkInterval`).
    init(
        checkInterval: Duration, pushedCheckInterval: Duration? = nil, grace: Duration, maximumEntries: Int = 100_000,
        check: @escaping Check
    ) {
        self.check = check
        self.checkInterval = checkInterval
        self.pushedCheckInterval = max(pushedCheckInterval ?? checkInterval, checkInterval)
        self.grace = grace
        self.maximumEntries = maximumEntries
    }

    /// The session's state as auth said it recently enough (see the type's comment); `nil` when it has to be asked.
    func knownState(of caller: AuthenticatedCaller, now: ContinuousClock.Instant = .now) -> SessionState? {
        state.withLock { state in
            guard let cached = state.entries[caller] else { return nil }
            // A known end is acted on at once, whatever the interval.
            if let ended = state.endedAt[caller.userID], cached.checkedAt <= ended { return nil }
            let age = now - cached.checkedAt
            if age < checkInterval { return cached.state }
            guard let since = state.noticesSince, cached.checkedAt >= since, age < pushedCheckInterval else {
                return nil
            }
            return cached.state
        }
    }

    // MARK: Session-end notices

    /// A notice stream opened, or said `all_users` (auth may have missed ends): only answers from now on are trusted
    /// for the long interval.
    func noticesOpened(now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            state.noticesSince = now
            state.endedAt = [:]
        }
    }

    /// The notice stream is down: back to the short interval until one opens again (the ends already heard still
    /// count).
    func noticesEnded() {
        state.withLock { $0.noticesSince = nil }
    }

    /// Auth says a session of each of `users` ended: their answers from before now are asked again.
    func sessionsEnded(of users: some Sequence<UUID>, now: ContinuousClock.Instant = .now) {
        let pushedCheckInterval = self.pushedCheckInterval
        state.withLock { state in
            for user in users { state.endedAt[user] = now }
            // A mark older than the long interval only covers answers that are too old anyway.
            if state.endedAt.count > maximumEntries {
                state.endedAt = state.endedAt.filter { now - $0.value < pushedCheckInterval }
                if state.endedAt.count > maximumEntries { (state.noticesSince, state.endedAt) = (now, [:]) }
            }
        }
    }

    /// Follows auth's session-end notices for as long as the task runs.
    func follow(_ notices: ChangeNoticeSubscription, logger: Logger) async {
        await notices.follow(logger: logger) { notice in
            if notice.allUsers { noticesOpened() }
            sessionsEnded(of: notice.userIds.lazy.compactMap(UUID.init(uuidString:)))
        } onEnded: {
            noticesEnded()
        }
    }

    /// Returns when the caller's session is active; `UNAUTHENTICATED` when it is not, `UNAVAILABLE` when auth cannot
    /// say and the last answer is older than the grace period.
    func requireActive(_ caller: AuthenticatedCaller, now: ContinuousClock.Instant = .now) async throws(RPCError) {
        let sessionState: SessionState
        if let known = knownState(of: caller, now: now) {
            sessionState = known
        } else {
            do {
                sessionState = try await fetch(caller, now: now)
            } catch {
                let cached = state.withLock { $0.entries[caller] }
                guard let cached, cached.state == .active, now - cached.checkedAt < grace else {
                    throw RPCError(.unavailable, "cannot check the session: the auth service is unavailable")
                }
                sessionState = .active
            }
        }
        switch sessionState {
        case .active: return
        case .revoked:
            throw RPCError.unauthenticated(reason: "SESSION_REVOKED", "this session was signed out; sign in again")
        case .expired:
            throw RPCError.unauthenticated(reason: "SESSION_EXPIRED", "this session has expired; sign in again")
        case .notFound:
            throw RPCError.unauthenticated(reason: "SESSION_NOT_FOUND", "this session or its account no longer exists")
        }
    }

    private func fetch(_ caller: AuthenticatedCaller, now: ContinuousClock.Instant) async throws -> SessionState {
        let check = self.check
        let task = state.withLock { state in
            if let inFlight = state.inFlight[caller] { return inFlight }
            let task = Task { try await check(caller) }
            state.inFlight[caller] = task
            return task
        }
        let result = await task.result
        let maximumEntries = self.maximumEntries
        let grace = self.grace
        state.withLock { state in
            guard state.inFlight[caller] == task else { return }
            state.inFlight[caller] = nil
            guard case .success(let sessionState) = result else { return }
            if state.entries.count >= maximumEntries {
                state.entries = state.entries.filter { now - $0.value.checkedAt < grace }
            }
            // When the check started: the answer is at least that fresh.
            state.entries[caller] = Entry(state: sessionState, checkedAt: now)
        }
        return try result.get()
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
