public import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowLocking

/// The tokens of a signed-in session, as the SDK keeps them (`Codable`, for an app's keychain).
public struct StoredTokens: Sendable, Hashable, Codable {
    public var accessToken: String
    public var accessTokenExpiresAt: Date
    public var refreshToken: String
    public var refreshTokenExpiresAt: Date
    public var sessionID: String
    /// The signed-in user's id (UUID), when known.
    public var userID: String?

    public init(
        accessToken: String, accessTokenExpiresAt: Date, refreshToken: String, refreshTokenExpiresAt: Date,
        sessionID: String, userID: String?
    ) {
        self.accessToken = accessToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.refreshToken = refreshToken
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
        self.sessionID = sessionID
        self.userID = userID
    }

    init(_ tokens: Habitflow_Auth_V1_AuthTokens, userID: String?) {
        self.init(
            accessToken: tokens.accessToken, accessTokenExpiresAt: tokens.accessTokenExpireTime.date,
            refreshToken: tokens.refreshToken, refreshTokenExpiresAt: tokens.refreshTokenExpireTime.date,
            sessionID: tokens.sessionID, userID: userID)
    }
}

/// Where the SDK keeps the session's tokens between calls and launches. An app stores them in its keychain; the
/// default keeps them in memory only.
public protocol TokenStore: Sendable {
    func load() async -> StoredTokens?
    func save(_ tokens: StoredTokens) async
    func clear() async
}

/// Keeps the tokens in memory (they are gone when the process ends).
public final class InMemoryTokenStore: TokenStore {
    private let tokens: Locked<StoredTokens?>

    public init(_ tokens: StoredTokens? = nil) {
        self.tokens = Locked(tokens)
    }

    public func load() async -> StoredTokens? { tokens.withLock { $0 } }
    public func save(_ tokens: StoredTokens) async { self.tokens.withLock { $0 = tokens } }
    public func clear() async { tokens.withLock { $0 = nil } }
}

/// The session's tokens and their renewal: one refresh at a time, whatever the number of calls that found the access
/// token expired (a refresh token is good for one use only: two concurrent refreshes would sign the session out).
actor TokenSession {
    typealias Refresh = @Sendable (_ refreshToken: String) async throws -> Habitflow_Auth_V1_AuthTokens

    private let store: any TokenStore
    private let refreshMargin: Duration
    private let performRefresh: Refresh
    private var tokens: StoredTokens?
    private var loaded = false
    private var refreshing: Task<StoredTokens, any Error>?

    init(store: any TokenStore, refreshMargin: Duration, refresh: @escaping Refresh) {
        self.store = store
        self.refreshMargin = refreshMargin
        self.performRefresh = refresh
    }

    func current() async -> StoredTokens? {
        if !loaded {
            tokens = await store.load()
            loaded = true
        }
        return tokens
    }

    /// An access token that is not about to expire, refreshing first when needed.
    func accessToken() async throws -> String {
        guard let tokens = await current() else {
            throw HabitFlowError.notSignedIn("not signed in: sign up or log in first")
        }
        if tokens.accessTokenExpiresAt.timeIntervalSinceNow > refreshMargin.timeInterval { return tokens.accessToken }
        return try await refreshed(replacing: tokens.accessToken).accessToken
    }

    /// New tokens after `staleAccessToken` was refused as expired: refreshes unless another call already did (then
    /// its result is returned), and joins a refresh in progress rather than starting a second one.
    func refreshed(replacing staleAccessToken: String) async throws -> StoredTokens {
        guard let tokens = await current() else {
            throw HabitFlowError.notSignedIn("not signed in: sign up or log in first")
        }
        if tokens.accessToken != staleAccessToken { return tokens }
        if let refreshing { return try await refreshing.value }
        let performRefresh = self.performRefresh
        let task = Task { () async throws -> StoredTokens in
            do {
                return StoredTokens(try await performRefresh(tokens.refreshToken), userID: tokens.userID)
            } catch let error as HabitFlowError where error.kind == .notSignedIn || error.kind == .invalidInput {
                // The refresh token is used up, expired or its session revoked: the session is over.
                throw HabitFlowError.notSignedIn("the session has ended (\(error.message)); log in again")
            }
        }
        refreshing = task
        let result = await task.result
        if refreshing == task { refreshing = nil }
        switch result {
        case .success(let fresh):
            await replace(with: fresh)
            return fresh
        case .failure(let error):
            if (error as? HabitFlowError)?.kind == .notSignedIn { await clear() }
            throw error
        }
    }

    func replace(with fresh: StoredTokens) async {
        tokens = fresh
        loaded = true
        await store.save(fresh)
    }

    func clear() async {
        tokens = nil
        loaded = true
        await store.clear()
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
