public import Foundation
public import HabitFlowTLS

/// Where a JWK Set comes from: a file (configured keys, tests) or an `https` URL (a provider's `jwks_uri`).
public struct JWKSSource: Sendable, CustomStringConvertible {
    enum Location: Sendable {
        case file(String)
        case url(URL, trustRoots: TLSConfiguration.TrustRoots, timeout: Duration)
    }

    let location: Location

    /// The JWK Set document at `path`.
    public static func file(_ path: String) -> JWKSSource {
        JWKSSource(location: .file(path))
    }

    /// The JWK Set served at `url`, which must be `https`, fetched with HTTP/1.1 GET.
    ///
    /// - Parameters:
    ///   - trustRoots: Who may issue the server's certificate. Default: the system's store.
    ///   - timeout: For the whole fetch: connect, handshake, request and response. Default 10 seconds.
    public static func url(
        _ url: URL,
        trustRoots: TLSConfiguration.TrustRoots = .systemDefault,
        timeout: Duration = .seconds(10)
    ) -> JWKSSource {
        JWKSSource(location: .url(url, trustRoots: trustRoots, timeout: timeout))
    }

    public var description: String {
        switch location {
        case .file(let path): path
        case .url(let url, _, _): url.absoluteString
        }
    }

    /// Reads and parses the document now. Documents over ``JSONWebKeySet/maximumByteCount`` are refused.
    public func load() async throws(TokenError) -> JSONWebKeySet {
        let limit = JSONWebKeySet.maximumByteCount
        let bytes: [UInt8]
        switch location {
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw .keySetUnavailable("cannot open \(path)")
            }
            defer { try? handle.close() }
            do {
                bytes = Array(try handle.read(upToCount: limit + 1) ?? Data())
            } catch {
                throw .keySetUnavailable("cannot read \(path): \(error)")
            }
            guard bytes.count <= limit else { throw .keySetUnavailable("\(path) is larger than \(limit) bytes") }
        case .url(let url, let trustRoots, let timeout):
            let client = HTTPSGetClient(trustRoots: trustRoots, timeout: timeout, maximumBodyBytes: limit)
            do {
                bytes = try await client.get(url)
            } catch {
                throw .keySetUnavailable("\(url.absoluteString): \(error.description)")
            }
        }
        return try JSONWebKeySet(json: Data(bytes))
    }
}

/// Loads a JWK Set from a ``JWKSSource`` and keeps it, refetching when a token names a key it does not have.
///
/// Providers rotate keys and publish the new one shortly before using it; a token with an unknown `kid` is the
/// signal to refetch. Fetches are rate-limited to one per `refetchInterval` (successful or not), so a stream of
/// tokens with made-up `kid`s cannot turn us into a load generator against the provider. Concurrent callers share
/// one fetch. When a refetch fails, the keys already held stay in use.
public actor JWKSProvider {
    public nonisolated let source: JWKSSource
    public nonisolated let refetchInterval: Duration
    public nonisolated let maximumAge: Duration

    private let clock = ContinuousClock()
    private var current: JSONWebKeySet?
    private var fetchedAt: ContinuousClock.Instant?
    private var lastAttempt: ContinuousClock.Instant?
    private var lastError: TokenError?
    private var inFlight: Task<Result<JSONWebKeySet, TokenError>, Never>?

    /// How many times the source was loaded (successfully or not).
    public private(set) var loadCount = 0

    /// - Parameters:
    ///   - refetchInterval: The least time between two loads. Default 60 seconds.
    ///   - maximumAge: After this, the next request for keys loads them again (providers rotate keys every few
    ///     days to weeks). Default one hour.
    public init(source: JWKSSource, refetchInterval: Duration = .seconds(60), maximumAge: Duration = .seconds(3600)) {
        self.source = source
        self.refetchInterval = refetchInterval
        self.maximumAge = maximumAge
    }

    /// The current keys, loaded on first use and when older than ``maximumAge``.
    ///
    /// Throws ``TokenError/keySetUnavailable(_:)`` only when no keys were ever loaded.
    public func keys() async throws(TokenError) -> JSONWebKeySet {
        if let current, let fetchedAt, clock.now < fetchedAt + maximumAge { return current }
        guard mayLoad || inFlight != nil else {
            if let current { return current }
            throw lastError ?? .keySetUnavailable("\(source) is not loaded")
        }
        do {
            return try await load()
        } catch {
            if let current { return current }
            throw error
        }
    }

    /// The current keys, refetched first when they have no key `keyID` and the last load is older than
    /// ``refetchInterval``. The result may still lack `keyID`: the verifier then reports an unknown key.
    public func keys(containing keyID: String) async throws(TokenError) -> JSONWebKeySet {
        let keys = try await keys()
        guard keys.key(id: keyID) == nil, mayLoad || inFlight != nil else { return keys }
        return (try? await load()) ?? keys
    }

    private var mayLoad: Bool {
        guard let lastAttempt else { return true }
        return clock.now >= lastAttempt + refetchInterval
    }

    private func load() async throws(TokenError) -> JSONWebKeySet {
        let task: Task<Result<JSONWebKeySet, TokenError>, Never>
        if let inFlight {
            task = inFlight
        } else {
            lastAttempt = clock.now
            loadCount += 1
            let source = source
            task = Task {
                do throws(TokenError) {
                    return .success(try await source.load())
                } catch {
                    return .failure(error)
                }
            }
            inFlight = task
        }
        let result = await task.value
        if inFlight == task {
            inFlight = nil
            switch result {
            case .success(let keys):
                current = keys
                fetchedAt = clock.now
                lastError = nil
            case .failure(let error):
                lastError = error
            }
        }
        return try result.get()
    }
}

/// Verifies OIDC ID tokens with keys that ``JWKSProvider``s keep current: the production form of
/// ``IDTokenVerifier``, which it uses for the checks.
public struct RefreshingIDTokenVerifier: Sendable {
    /// An identity provider whose keys come from a ``JWKSProvider``.
    public struct Provider: Sendable {
        public var name: String
        public var issuers: [String]
        public var audiences: [String]
        public var keys: JWKSProvider

        public init(name: String, issuers: [String], audiences: [String], keys: JWKSProvider) {
            self.name = name
            self.issuers = issuers
            self.audiences = audiences
            self.keys = keys
        }

        /// Google, with keys from `keys` (default: Google's published key set).
        public static func google(clientIDs: [String], keys: JWKSProvider? = nil) -> Provider {
            Provider(
                name: "google", issuers: OIDCProvider.googleIssuers, audiences: clientIDs,
                keys: keys ?? JWKSProvider(source: .url(OIDCProvider.googleKeySetURL)))
        }

        /// Apple, with keys from `keys` (default: Apple's published key set).
        public static func apple(clientIDs: [String], keys: JWKSProvider? = nil) -> Provider {
            Provider(
                name: "apple", issuers: OIDCProvider.appleIssuers, audiences: clientIDs,
                keys: keys ?? JWKSProvider(source: .url(OIDCProvider.appleKeySetURL)))
        }
    }

    public let providers: [String: Provider]
    public let leeway: Duration

    /// - Parameter providers: Should two share a name, the first wins.
    /// - Precondition: `leeway` is not negative.
    public init(providers: [Provider], leeway: Duration = .seconds(60)) {
        precondition(leeway >= .zero, "the leeway must not be negative")
        self.providers = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.leeway = leeway
    }

    public func verify(_ idToken: String, provider name: String, now: Date) async throws(TokenError) -> IDTokenClaims {
        guard let provider = providers[name] else { throw .unknownProvider(name) }
        let jws = try CompactJWS(parsing: idToken)
        let keys = try await provider.keys.keys(containing: jws.requireKeyID())
        let snapshot = OIDCProvider(
            name: provider.name, issuers: provider.issuers, audiences: provider.audiences, keys: keys)
        return try IDTokenVerifier.verify(jws, provider: snapshot, now: now, leeway: leeway)
    }
}
