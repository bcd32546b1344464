internal import HabitFlowInternalCredential
public import HabitFlowRPCClient
internal import HabitFlowRPCServer
public import Logging
internal import Testing

// Reaching the service hosts the suites start: free ports and channels that sign calls as another process would.

/// A loopback port nothing listens on right now (a server bound to port 0, then stopped): for a host that must be
/// known to another before it starts.
public func freeLoopbackPort(logger: Logger) async throws -> Int {
    let probe = RPCServer(
        configuration: RPCServerConfiguration(host: "127.0.0.1", port: 0), services: [], interceptors: [],
        logger: logger)
    try await probe.start()
    let port = try #require(probe.localAddress?.port)
    await probe.shutdown()
    return port
}

/// A channel to the host on `port` whose calls carry the internal credential of `caller` ("gateway" for calls on a
/// user's behalf, a service's name for internal calls), signed with `secret`.
public func internalChannel(to port: Int, signedAs caller: String, secret: String, logger: Logger) throws
    -> RPCChannel
{
    try RPCChannel(
        configuration: RPCChannelConfiguration(host: "127.0.0.1", port: port),
        interceptors: [
            InternalCredentialClientInterceptor(credential: InternalCredential(secret: secret), caller: caller)
        ],
        logger: logger)
}
