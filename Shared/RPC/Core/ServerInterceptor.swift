/// Wraps every call a server handles, outermost first: for authentication, logging, metrics, tracing.
///
/// An interceptor reads ``ServerContext/requestMetadata``, may add response metadata, and either calls `next` (the
/// following interceptors and then the handler) or ends the call by throwing an ``RPCError`` before the handler runs.
/// Values for the handler travel as task-local values bound around `next`.
public protocol ServerInterceptor: Sendable {
    func intercept(context: ServerContext, next: @Sendable () async throws -> Void) async throws
}

extension Array where Element == any ServerInterceptor {
    /// Runs `handler` inside every interceptor, the first element outermost.
    public func run(context: ServerContext, handler: @escaping @Sendable () async throws -> Void) async throws {
        var next = handler
        for interceptor in reversed() {
            let inner = next
            next = { try await interceptor.intercept(context: context, next: inner) }
        }
        try await next()
    }
}
