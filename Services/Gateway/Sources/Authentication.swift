internal import Foundation
internal import HabitFlowRPC
internal import HabitFlowTokens
internal import Synchronization

/// The signed-in user a client call acts for: what the access token says, after the gateway checked it.
struct AuthenticatedCaller: Sendable, Hashable {
    var userID: UUID
    var sessionID: String

    /// Bound by ``AuthenticationInterceptor`` around every authenticated call.
    @TaskLocal static var current: AuthenticatedCaller?
}

/// Turns `authorization: Bearer <access token>` into an ``AuthenticatedCaller``: the token is verified locally (its
/// Ed25519 signature with auth's published keys, issuer, audience, expiry), then its session is checked with auth
/// (cached for a few seconds), so tokens of revoked sessions and deleted accounts stop working within seconds.
final class Authenticator: Sendable {
    private let keys: AccessTokenKeys
    private let sessions: SessionChecker

    init(keys: AccessTokenKeys, sessions: SessionChecker) {
        self.keys = keys
        self.sessions = sessions
    }

    func authenticate(_ metadata: Metadata, now: Date = Date()) async throws(RPCError) -> AuthenticatedCaller {
        guard let token = Self.bearerToken(in: metadata) else {
            throw RPCError.unauthenticated(
                reason: "TOKEN_MISSING", "this call needs the metadata `authorization: Bearer <access token>`")
        }
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
        guard let userID = UUID(uuidString: claims.subject) else {
            throw RPCError.unauthenticated(reason: "TOKEN_INVALID", "the access token's subject is not a user id")
        }
        let caller = AuthenticatedCaller(userID: userID, sessionID: claims.sessionID)
        try await sessions.requireActive(caller)
        return caller
    }

    /// The token of `authorization: Bearer <token>` (the scheme is case-insensitive, RFC 6750).
    static func bearerToken(in metadata: Metadata) -> String? {
        guard let value = metadata["authorization"] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
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
    private let state = Mutex(State())

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
final class SessionChecker: Sendable {
    enum SessionState: Sendable, Equatable {
        case active
        case revoked
        case expired
        case notFound
    }

    typealias Check = @Sendable (_ caller: AuthenticatedCaller) async throws -> SessionState

    private struct Entry {
        var state: SessionState
        var checkedAt: ContinuousClock.Instant
    }

    private struct State {
        var entries: [AuthenticatedCaller: Entry] = [:]
        var inFlight: [AuthenticatedCaller: Task<SessionState, any Error>] = [:]
    }

    private let check: Check
    private let checkInterval: Duration
    private let grace: Duration
    private let maximumEntries: Int
    private let state = Mutex(State())

    init(checkInterval: Duration, grace: Duration, maximumEntries: Int = 100_000, check: @escaping Check) {
        self.check = check
        self.checkInterval = checkInterval
        self.grace = grace
        self.maximumEntries = maximumEntries
    }

    /// Returns when the caller's session is active; `UNAUTHENTICATED` when it is not, `UNAVAILABLE` when auth cannot
    /// say and the last answer is older than the grace period.
    func requireActive(_ caller: AuthenticatedCaller) async throws(RPCError) {
        let now = ContinuousClock.now
        let cached = state.withLock { $0.entries[caller] }
        let sessionState: SessionState
        if let cached, now - cached.checkedAt < checkInterval {
            sessionState = cached.state
        } else {
            do {
                sessionState = try await fetch(caller)
            } catch {
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

    private func fetch(_ caller: AuthenticatedCaller) async throws -> SessionState {
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
                let now = ContinuousClock.now
                state.entries = state.entries.filter { now - $0.value.checkedAt < grace }
            }
            state.entries[caller] = Entry(state: sessionState, checkedAt: .now)
        }
        return try result.get()
    }
}
