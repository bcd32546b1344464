internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import NIOCore

/// What a ``UnaryCallForwarder`` answers its call through: the stream's connection, on its event loop.
struct EventLoopCallResponder: ForwardedCallResponder {
    let connection: NIOLoopBound<ServerConnectionHandler>
    let streamID: Int32

    func sendResponse(_ payload: ByteBuffer, compressed: Bool) {
        _ = connection.value.sendResponse(payload, compressed: compressed, streamID: streamID)
    }

    func finish(_ outcome: Result<Void, any Error>) {
        connection.value.handlerFinished(streamID: streamID, outcome: outcome)
    }

    func onCancel(_ cancel: @escaping @Sendable () -> Void) {
        connection.value.onForwardedCallCancelled(streamID: streamID, cancel)
    }

    func continueInTask(_ handler: @escaping @Sendable (any ServerCallTransport) async throws -> Void) {
        connection.value.continueForwardedCallInTask(streamID: streamID, handler)
    }
}

extension RPCServerConfiguration.HandlerExecution {
    /// Where the handlers of a connection on `eventLoop` run (`nil`: the global concurrent executor).
    func taskExecutor(on eventLoop: any EventLoop) -> (any TaskExecutor)? {
        switch self {
        case .eventLoop: EventLoopTaskExecutor(eventLoop: eventLoop)
        case .globalConcurrentExecutor: nil
        }
    }
}
