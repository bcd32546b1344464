internal import HabitFlowInternalCredential
internal import Foundation
internal import HabitFlowRPC
public import HabitFlowRPCClient
public import Logging

/// How the HabitFlow scenarios reach the services.
public enum HabitFlowRoute: Sendable, CustomStringConvertible {
    /// Through the gateway, as clients do: one connection carries auth and habits calls, a user's calls carry
    /// `authorization: Bearer <access token>`.
    case gateway(RPCTarget)
    /// Straight to the services, signed with the internal credential as the gateway signs them (no gateway in the
    /// path: for seeding, and for measuring the services alone).
    case direct(auth: RPCTarget, habits: RPCTarget, internalSecret: String)

    var hasGateway: Bool {
        if case .gateway = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .gateway(let target): "\(target)"
        case .direct(let auth, let habits, _): "auth \(auth), habits \(habits) (direct)"
        }
    }
}

/// One connection of a HabitFlow scenario: to the gateway (both fields the same channel), or one to each service.
public struct HabitFlowConnection: Sendable {
    public let auth: RPCChannel
    public let habits: RPCChannel

    var isShared: Bool { auth === habits }

    func close() async {
        await auth.close()
        if !isShared { await habits.close() }
    }
}

/// Opens connections for a route and says how a user's calls are authorized on it.
public struct HabitFlowConnector: Sendable {
    public let route: HabitFlowRoute
    public let connectTimeout: Duration
    let logger: Logger

    public init(route: HabitFlowRoute, connectTimeout: Duration = .seconds(10), logger: Logger) {
        self.route = route
        self.connectTimeout = connectTimeout
        self.logger = logger
    }

    public func open() async throws -> HabitFlowConnection {
        switch route {
        case .gateway(let target):
            let channel = try await RPCConnector(target: target, connectTimeout: connectTimeout, logger: logger).open()
            return HabitFlowConnection(auth: channel, habits: channel)
        case .direct(let auth, let habits, let secret):
            let signer = InternalCredentialClientInterceptor(credential: InternalCredential(secret: secret), caller: "gateway")
            let authChannel = try await RPCConnector(
                target: auth, connectTimeout: connectTimeout, logger: logger, interceptors: [signer]
            ).open()
            do {
                let habitsChannel = try await RPCConnector(
                    target: habits, connectTimeout: connectTimeout, logger: logger, interceptors: [signer]
                ).open()
                return HabitFlowConnection(auth: authChannel, habits: habitsChannel)
            } catch {
                await authChannel.close()
                throw error
            }
        }
    }

    /// Options for a call made as a user: a bearer token for the gateway, the user id for a service.
    func options(userID: UUID, accessToken: String, timeout: Duration) -> CallOptions {
        switch route {
        case .gateway:
            var options = CallOptions(timeout: timeout)
            options.metadata.add("authorization", "Bearer \(accessToken)")
            return options
        case .direct:
            return .onBehalf(of: userID, timeout: timeout)
        }
    }
}

