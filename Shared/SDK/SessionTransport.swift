internal import Foundation
internal import HabitFlowAuthProtos
internal import HabitFlowLocking
internal import HabitFlowPublicAPI
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import NIOCore
internal import SwiftProtobuf

/// The transport the SDK's typed clients run on: a gateway channel plus the session. Every call gets a deadline (the
/// configured default when it has none) and, unless it is one of the calls that sign in, the access token; an
/// access token the gateway refuses as expired is refreshed (once for all the calls that hit it) and the call sent
/// again. Tokens in the responses of Register, Login, SocialLogin and Refresh are kept; Logout and DeleteAccount
/// forget them. Every error is a ``HabitFlowError``.
final class SessionTransport: RPCClientTransport {
    let channel: RPCChannel
    let session: TokenSession
    let defaultTimeout: Duration

    init(channel: RPCChannel, session: TokenSession, defaultTimeout: Duration) {
        self.channel = channel
        self.session = session
        self.defaultTimeout = defaultTimeout
    }

    func startCall(
        _ method: MethodDescriptor, options: CallOptions, singleRequest: ByteBuffer?
    ) async throws -> any ClientCallStream {
        var options = options
        if options.timeout == nil, options.deadline == nil { options.timeout = defaultTimeout }
        // One deadline for the whole call, also when it is sent again after a refresh.
        options.deadline = options.effectiveDeadline()
        options.timeout = nil
        let authenticated = !PublicAPI.unauthenticatedMethods.contains(method.path)
        do {
            let (stream, token) = try await open(method, options: options, singleRequest: singleRequest, authenticated: authenticated)
            return SessionCallStream(
                transport: self, method: method, options: options, singleRequest: singleRequest,
                authenticated: authenticated, stream: stream, accessToken: token)
        } catch {
            throw await handle(error, authenticated: authenticated)
        }
    }

    /// Starts the call with the current access token (when it needs one).
    func open(
        _ method: MethodDescriptor, options: CallOptions, singleRequest: ByteBuffer?, authenticated: Bool,
        accessToken: String? = nil
    ) async throws -> (any ClientCallStream, String?) {
        var options = options
        var token: String?
        if authenticated {
            let current: String
            if let accessToken {
                current = accessToken
            } else {
                current = try await session.accessToken()
            }
            token = current
            options.metadata.set("authorization", "Bearer \(current)")
        }
        return (try await channel.startCall(method, options: options, singleRequest: singleRequest), token)
    }

    /// The error as a ``HabitFlowError``; a refusal of the session itself (revoked, expired, account deleted) also
    /// forgets the tokens, so the app sees it is signed out.
    func handle(_ error: any Error, authenticated: Bool) async -> HabitFlowError {
        let mapped = HabitFlowError(error)
        if authenticated, mapped.kind == .notSignedIn,
            let reason = mapped.reason, reason.hasPrefix("SESSION_")
        {
            await session.clear()
        }
        return mapped
    }

    /// Keeps or forgets tokens according to a successful response of an auth method.
    func observe(response: ByteBuffer, of method: MethodDescriptor) async {
        let bytes = Array(buffer: response)
        switch method.path {
        case Habitflow_Auth_V1_AuthService.Method.register.path:
            if let response = try? Habitflow_Auth_V1_RegisterResponse(serializedBytes: bytes), response.hasTokens {
                await session.replace(with: StoredTokens(response.tokens, userID: response.user.id))
            }
        case Habitflow_Auth_V1_AuthService.Method.login.path:
            if let response = try? Habitflow_Auth_V1_LoginResponse(serializedBytes: bytes), response.hasTokens {
                await session.replace(with: StoredTokens(response.tokens, userID: response.user.id))
            }
        case Habitflow_Auth_V1_AuthService.Method.socialLogin.path:
            if let response = try? Habitflow_Auth_V1_SocialLoginResponse(serializedBytes: bytes), response.hasTokens {
                await session.replace(with: StoredTokens(response.tokens, userID: response.user.id))
            }
        case Habitflow_Auth_V1_AuthService.Method.refresh.path:
            if let response = try? Habitflow_Auth_V1_RefreshResponse(serializedBytes: bytes), response.hasTokens {
                let userID = await session.current()?.userID
                await session.replace(with: StoredTokens(response.tokens, userID: userID))
            }
        case Habitflow_Auth_V1_AuthService.Method.logout.path,
            Habitflow_Auth_V1_AuthService.Method.deleteAccount.path:
            await session.clear()
        default:
            break
        }
    }

    static let observedMethods: Set<String> = [
        Habitflow_Auth_V1_AuthService.Method.register.path, Habitflow_Auth_V1_AuthService.Method.login.path,
        Habitflow_Auth_V1_AuthService.Method.socialLogin.path, Habitflow_Auth_V1_AuthService.Method.refresh.path,
        Habitflow_Auth_V1_AuthService.Method.logout.path, Habitflow_Auth_V1_AuthService.Method.deleteAccount.path,
    ]
}

/// One call of the SDK: the channel's call, replaced by a fresh one when the first attempt was refused for an
/// expired access token (single-request calls only, before anything was delivered: nothing is lost or repeated).
final class SessionCallStream: ClientCallStream {
    private let transport: SessionTransport
    private let method: MethodDescriptor
    private let options: CallOptions
    private let singleRequest: ByteBuffer?
    private let authenticated: Bool
    private let state: Locked<State>

    private struct State {
        var stream: any ClientCallStream
        var accessToken: String?
        var retried = false
        var delivered = false
    }

    init(
        transport: SessionTransport, method: MethodDescriptor, options: CallOptions, singleRequest: ByteBuffer?,
        authenticated: Bool, stream: any ClientCallStream, accessToken: String?
    ) {
        self.transport = transport
        self.method = method
        self.options = options
        self.singleRequest = singleRequest
        self.authenticated = authenticated
        self.state = Locked(State(stream: stream, accessToken: accessToken))
    }

    private var stream: any ClientCallStream { state.withLock { $0.stream } }

    func send(_ message: ByteBuffer) async throws {
        do {
            try await stream.send(message)
        } catch {
            throw HabitFlowError(error)
        }
    }

    func finishRequests() async {
        await stream.finishRequests()
    }

    func initialMetadata() async throws -> Metadata {
        try await withRefreshRetry { try await $0.initialMetadata() }
    }

    func nextReceivedMessage() async throws -> ReceivedMessage? {
        let message = try await withRefreshRetry { try await $0.nextReceivedMessage() }
        if let message {
            state.withLock { $0.delivered = true }
            if SessionTransport.observedMethods.contains(method.path) {
                await transport.observe(response: message.payload, of: method)
            }
        }
        return message
    }

    var trailers: Metadata { stream.trailers }

    func cancel() {
        stream.cancel()
    }

    private func withRefreshRetry<Result>(_ body: (any ClientCallStream) async throws -> Result) async throws -> Result {
        while true {
            let current = stream
            do {
                return try await body(current)
            } catch {
                let mapped = HabitFlowError(error)
                guard let token = retryableTokenRefusal(mapped) else {
                    throw await transport.handle(error, authenticated: authenticated)
                }
                do {
                    let fresh = try await transport.session.refreshed(replacing: token)
                    let (replacement, _) = try await transport.open(
                        method, options: options, singleRequest: singleRequest, authenticated: true,
                        accessToken: fresh.accessToken)
                    state.withLock {
                        $0.stream = replacement
                        $0.accessToken = fresh.accessToken
                    }
                } catch {
                    throw await transport.handle(error, authenticated: authenticated)
                }
            }
        }
    }

    /// The access token to replace when `error` says it expired and the call can be sent again (once).
    private func retryableTokenRefusal(_ error: HabitFlowError) -> String? {
        guard authenticated, singleRequest != nil, error.reason == "TOKEN_EXPIRED" else { return nil }
        return state.withLock { state -> String? in
            guard !state.retried, !state.delivered, let token = state.accessToken else { return nil }
            state.retried = true
            return token
        }
    }
}
