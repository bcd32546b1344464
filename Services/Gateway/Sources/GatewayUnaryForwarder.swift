internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import HabitFlowRPCProxy
internal import HabitFlowServiceKit

extension GatewayServiceDefinition {
    /// The event-loop fast path of a forwarded unary method (most of the gateway's traffic). Every call goes through
    /// the interceptor's admission (``GatewayInterceptor/admit(_:)``) on the event loop. A call the caches admit is
    /// signed and passed to the owning service without a task (``EventLoopUnaryForwarder``). A call whose token or
    /// session the caches do not know continues in a task that authenticates it first. Either way it ends counted
    /// and logged as the interceptor would.
    static func unaryForwarder(
        _ method: MethodSchema, channel: RPCChannel, interceptor: GatewayInterceptor, credential: InternalCredential,
        defaultTimeout: Duration
    ) -> EventLoopUnaryForwarder {
        EventLoopUnaryForwarder(method: method, channel: channel) { context in
            let start = ContinuousClock.now
            @Sendable func options(_ info: GatewayCallInfo) -> CallOptions {
                var options = CallOptions.forwarding(method, from: context)
                prepareForwardedCall(
                    &options, method: method.descriptor, credential: credential, defaultTimeout: defaultTimeout,
                    info: info)
                return options
            }
            @Sendable func ended(_ info: GatewayCallInfo) -> EventLoopUnaryForwarder.Decision.Ended {
                { outcome in
                    switch outcome {
                    case .success:
                        interceptor.ended(context, info: info, startedAt: start, code: .ok)
                        return outcome
                    case .failure(let error):
                        return .failure(interceptor.failed(context, info: info, startedAt: start, error: error))
                    }
                }
            }
            switch interceptor.admit(context) {
            case .refused(let info, let error):
                return .refuse(interceptor.failed(context, info: info, startedAt: start, error: error))
            case .admitted(let info):
                return .forward(options(info), ended: ended(info))
            case .authenticating(let waiting):
                return .decideInTask {
                    var info = waiting
                    do {
                        try await interceptor.authenticate(context, &info)
                    } catch {
                        return .refuse(interceptor.failed(context, info: info, startedAt: start, error: error))
                    }
                    return .forward(options(info), ended: ended(info))
                }
            }
        }
    }
}
