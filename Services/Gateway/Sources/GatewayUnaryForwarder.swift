internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowRPCClient
internal import HabitFlowServiceKit

extension GatewayServiceDefinition {
    /// The event-loop fast path of a forwarded unary method (most of the gateway's traffic): calls the token and
    /// session caches admit (``GatewayInterceptor/admitWithoutWaiting(_:)``) are signed and passed to the owning
    /// service without a task (``EventLoopUnaryForwarder``), and end counted and logged as the interceptor would.
    /// Every call the caches cannot admit takes the general path: the interceptor, then ``ForwardingService``.
    static func unaryForwarder(
        _ method: MethodSchema, channel: RPCChannel, interceptor: GatewayInterceptor, credential: InternalCredential,
        defaultTimeout: Duration
    ) -> EventLoopUnaryForwarder {
        EventLoopUnaryForwarder(method: method, channel: channel) { context in
            let start = ContinuousClock.now
            switch interceptor.admitWithoutWaiting(context) {
            case .undecided:
                return .decline
            case .refused(let info, let error):
                return .refuse(interceptor.failed(context, info: info, startedAt: start, error: error))
            case .admitted(let info):
                var options = CallOptions.forwarding(method, from: context)
                prepareForwardedCall(
                    &options, method: method.descriptor, credential: credential, defaultTimeout: defaultTimeout,
                    info: info)
                return .forward(options) { outcome in
                    switch outcome {
                    case .success:
                        interceptor.ended(context, info: info, startedAt: start, code: .ok)
                        return outcome
                    case .failure(let error):
                        return .failure(interceptor.failed(context, info: info, startedAt: start, error: error))
                    }
                }
            }
        }
    }
}
