public import Foundation
internal import HabitFlowCrypto
internal import HabitFlowLocking
public import HabitFlowRPC

/// Who is calling a service, as the internal credential vouches for it: the calling process and, for calls made on a
/// user's behalf, the user (with the session and client address the gateway saw).
///
/// The host's interceptor binds it around every handler; a handler asks ``requireUser()``.
public struct CallerIdentity: Sendable, Hashable {
    /// The calling process, for example `gateway` or `auth` (the outbox relay).
    public var caller: String
    public var userID: UUID?
    /// The access token's session, when the gateway authenticated a user.
    public var sessionID: String?
    /// The end client's address as the gateway saw it (for per-address throttling).
    public var clientAddress: String?

    public init(caller: String, userID: UUID? = nil, sessionID: String? = nil, clientAddress: String? = nil) {
        self.caller = caller
        self.userID = userID
        self.sessionID = sessionID
        self.clientAddress = clientAddress
    }

    @TaskLocal public static var current: CallerIdentity?

    /// The user the current call acts for; `UNAUTHENTICATED` when the call carries none (a public RPC reached without
    /// the gateway's authentication, or an internal call that forgot the user).
    public static func requireUser() throws(RPCError) -> UUID {
        guard let userID = current?.userID else {
            throw RPCError.unauthenticated(reason: "USER_REQUIRED", "this call needs an authenticated user")
        }
        return userID
    }

    /// Refuses a call the gateway forwarded: an internal service (named `service` in the message) is for other
    /// services only, even when a client reaches it through a misrouted gateway.
    public static func requireServiceCaller(of service: String) throws(RPCError) {
        if current?.caller == "gateway" { throw forwardedCallRefusal(service) }
    }

    static func forwardedCallRefusal(_ service: String) -> RPCError {
        RPCError.permissionDenied(reason: "INTERNAL_ONLY", "\(service) is for services, not clients")
    }
}

/// The credential every call between HabitFlow processes carries (DESIGN.md section 2, identity inside the mesh): the
/// caller's identity in metadata plus an HMAC-SHA256 over it, the method and the time, keyed with a secret only the
/// processes share. A client cannot forge a user id because it cannot compute the MAC; a captured credential is good
/// for one method and five minutes.
public struct InternalCredential: Sendable {
    public enum Key {
        public static let caller = "x-habitflow-caller"
        public static let userID = "x-habitflow-user-id"
        public static let sessionID = "x-habitflow-session-id"
        public static let clientAddress = "x-habitflow-client-address"
        public static let issuedAt = "x-habitflow-issued-at"
        public static let signature = "x-habitflow-internal-auth"
        static let all: Set<String> = [caller, userID, sessionID, clientAddress, issuedAt, signature]

        /// Whether `key` is one of the credential's entries (they all start with `x-habitflow-`).
        static func isCredentialKey(_ key: String) -> Bool {
            key.hasPrefix("x-habitflow-") && all.contains(key)
        }
    }

    /// The local stack's secret. Anything but a laptop sets `HABITFLOW_INTERNAL_SECRET`; the host logs a warning
    /// when this one is in use.
    public static let localDevelopmentSecret = "habitflow-local-development-secret"

    /// How far a credential's time may be from the verifier's clock, either way.
    public static let maximumClockSkew: TimeInterval = 300

    /// Keyed once: every call between processes is signed and verified with it.
    private let key: SHA256.HMACKey
    /// Signatures made in the current second (see ``SignatureCache``).
    private let recentSignatures = SignatureCache()

    public init(secret: String) {
        precondition(!secret.isEmpty, "the internal secret must not be empty")
        key = SHA256.HMACKey(secret.utf8)
    }

    /// The metadata that vouches for `identity` on a call of `method`.
    public func metadata(for identity: CallerIdentity, method: MethodDescriptor, now: Date = Date()) -> Metadata {
        var metadata = Metadata()
        sign(identity, method: method, now: now, into: &metadata)
        return metadata
    }

    /// Replaces any credential entries in `metadata` with ones vouching for `identity`.
    public func sign(_ identity: CallerIdentity, method: MethodDescriptor, now: Date = Date(), into metadata: inout Metadata) {
        // Room for the six entries below first: one allocation instead of growing step by step.
        metadata.reserveCapacity(metadata.count + 6)
        metadata.removeAll(where: Key.isCredentialKey)
        let seconds = Int64(now.timeIntervalSince1970)
        let issuedAt = String(seconds)
        let userID = identity.userID?.lowercasedString
        metadata.add(Key.caller, identity.caller)
        if let userID { metadata.add(Key.userID, userID) }
        if let sessionID = identity.sessionID { metadata.add(Key.sessionID, sessionID) }
        if let clientAddress = identity.clientAddress { metadata.add(Key.clientAddress, clientAddress) }
        metadata.add(Key.issuedAt, issuedAt)
        let message = macInput(identity, userID: userID ?? "", issuedAt: issuedAt, path: method.path)
        let signature = recentSignatures.signature(of: message, second: seconds) {
            Hex.encode(key.authenticationCode(for: message))
        }
        // A secret on connections that also carry metadata the gateway's clients chose: HPACK's "never indexed" keeps
        // it out of the compression tables, whose effect on frame sizes could otherwise be probed (RFC 7541 7.1.3).
        metadata.add(Key.signature, signature, neverIndexed: true)
    }

    /// The identity `metadata` vouches for on a call of `method`; `UNAUTHENTICATED` when it is missing, forged,
    /// made for another method or too old.
    public func verify(_ metadata: Metadata, method: MethodDescriptor, now: Date = Date()) throws(RPCError) -> CallerIdentity {
        guard let caller = metadata[Key.caller], let issuedAt = metadata[Key.issuedAt],
            let signature = metadata[Key.signature]
        else {
            throw RPCError.unauthenticated(
                reason: "INTERNAL_CREDENTIAL_MISSING", "calls to HabitFlow services go through the gateway")
        }
        var identity = CallerIdentity(
            caller: caller, sessionID: metadata[Key.sessionID], clientAddress: metadata[Key.clientAddress])
        if let userID = metadata[Key.userID] {
            guard let parsed = UUID(canonical: userID) else { throw invalid("the user id is not a UUID") }
            identity.userID = parsed
        }
        guard let seconds = Int64(issuedAt),
            abs(now.timeIntervalSince1970 - TimeInterval(seconds)) <= Self.maximumClockSkew
        else { throw invalid("the credential's time is out of range") }
        // The MAC covers the user id as sent (lowercased when we sign), so compare over that canonical form.
        guard let received = Hex.decode(signature.utf8),
            ConstantTime.equals(received, mac(identity, issuedAt: issuedAt, path: method.path))
        else { throw invalid("the credential's signature does not match") }
        return identity
    }

    private func invalid(_ message: String) -> RPCError {
        RPCError.unauthenticated(reason: "INTERNAL_CREDENTIAL_INVALID", message)
    }

    private func mac(_ identity: CallerIdentity, issuedAt: String, path: String) -> [UInt8] {
        key.authenticationCode(
            for: macInput(identity, userID: identity.userID?.lowercasedString ?? "", issuedAt: issuedAt, path: path))
    }

    /// What the MAC covers: fields joined by newlines, which none of them may contain (metadata values cannot).
    private func macInput(_ identity: CallerIdentity, userID: String, issuedAt: String, path: String) -> [UInt8] {
        var message: [UInt8] = []
        message.reserveCapacity(192)
        message.append(contentsOf: "v1".utf8)
        func append(_ field: String) {
            message.append(UInt8(ascii: "\n"))
            message.append(contentsOf: field.utf8)
        }
        append(identity.caller)
        append(userID)
        append(identity.sessionID ?? "")
        append(identity.clientAddress ?? "")
        append(issuedAt)
        append(path)
        return message
    }
}

/// The signatures made in the current second, by what they sign. Within a second, the calls of one user from one
/// address to one method carry the same credential (the time is in seconds), so a busy caller (the gateway
/// forwarding a client's calls) computes it once. Only the signing side uses it: verification always computes the MAC.
/// Entries of earlier seconds are dropped as the second turns, so it holds at most one second's distinct credentials
/// (and at most `capacity` of them).
final class SignatureCache: Sendable {
    private struct State {
        var second: Int64 = .min
        var signatures: [SignedBytes: String] = [:]
    }

    /// Hashed as one block of bytes (an array hashes element by element, which cost as much as the MAC).
    private struct SignedBytes: Hashable {
        var bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    private let state = Locked(State())
    private let capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    func signature(of message: [UInt8], second: Int64, sign: () -> String) -> String {
        let key = SignedBytes(bytes: message)
        if let known = state.withLock({ $0.second == second ? $0.signatures[key] : nil }) { return known }
        let signature = sign()
        state.withLock { state in
            if state.second != second {
                // Only ever forward: a late caller still signing for the previous second does not evict this one.
                guard second > state.second else { return }
                state.second = second
                state.signatures.removeAll(keepingCapacity: true)
            }
            if state.signatures.count < capacity { state.signatures[key] = signature }
        }
        return signature
    }
}

/// Server side: refuses calls without a valid internal credential (except the side services a load balancer or
/// grpcurl may call: health and reflection) and binds ``CallerIdentity/current`` for the handler.
public struct InternalCredentialServerInterceptor: ServerInterceptor {
    private let credential: InternalCredential
    private let openServices: Set<String>
    private let serviceOnlyServices: Set<String>

    public static let sideServices: Set<String> = [
        "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
    ]

    /// - Parameter serviceOnlyServices: services for other services only whose handlers do not check it themselves
    ///   (``CallerIdentity/requireServiceCaller(of:)``): a call signed as the gateway, which is what a forwarded
    ///   client call carries, is refused `PERMISSION_DENIED` (the event subscriber).
    public init(
        credential: InternalCredential, openServices: Set<String> = sideServices, serviceOnlyServices: Set<String> = []
    ) {
        self.credential = credential
        self.openServices = openServices
        self.serviceOnlyServices = serviceOnlyServices
    }

    public func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws {
        if openServices.contains(context.method.service) { return try await next() }
        let identity = try credential.verify(context.requestMetadata, method: context.method)
        if identity.caller == "gateway", serviceOnlyServices.contains(context.method.service) {
            throw CallerIdentity.forwardedCallRefusal(context.method.service)
        }
        try await CallerIdentity.$current.withValue(identity) { try await next() }
    }
}

/// Client side: signs every call of a channel. The identity is the one the call's metadata names (the gateway and
/// tests set `x-habitflow-user-id` and friends, see ``CallOptions/onBehalf(of:)``), else the identity of the call
/// being served (``CallerIdentity/current``: a service calling another on its user's behalf), else just the caller.
public struct InternalCredentialClientInterceptor: ClientInterceptor {
    private let credential: InternalCredential
    private let caller: String

    public init(credential: InternalCredential, caller: String) {
        self.credential = credential
        self.caller = caller
    }

    public func willStart(_ call: inout ClientCallDetails) async throws {
        let metadata = call.options.metadata
        var identity = CallerIdentity(caller: caller)
        if let userID = metadata[InternalCredential.Key.userID] {
            guard let parsed = UUID(canonical: userID) else {
                throw RPCError(.invalidArgument, "\(InternalCredential.Key.userID) is not a UUID")
            }
            identity.userID = parsed
            identity.sessionID = metadata[InternalCredential.Key.sessionID]
            identity.clientAddress = metadata[InternalCredential.Key.clientAddress]
        } else if let current = CallerIdentity.current {
            identity.userID = current.userID
            identity.sessionID = current.sessionID
            identity.clientAddress = current.clientAddress
        } else {
            identity.clientAddress = metadata[InternalCredential.Key.clientAddress]
        }
        credential.sign(identity, method: call.method, into: &call.options.metadata)
    }
}

extension CallOptions {
    /// Options for a call on `userID`'s behalf through a channel with an ``InternalCredentialClientInterceptor``.
    public static func onBehalf(
        of userID: UUID, sessionID: String? = nil, clientAddress: String? = nil, timeout: Duration? = nil
    ) -> CallOptions {
        var options = CallOptions()
        options.timeout = timeout
        options.metadata.add(InternalCredential.Key.userID, userID.lowercasedString)
        if let sessionID { options.metadata.add(InternalCredential.Key.sessionID, sessionID) }
        if let clientAddress { options.metadata.add(InternalCredential.Key.clientAddress, clientAddress) }
        return options
    }
}
