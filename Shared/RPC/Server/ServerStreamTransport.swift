internal import HabitFlowHTTP2
internal import HabitFlowLocking
internal import HabitFlowRPC
internal import NIOCore

/// What a connection that serves calls offers their transports (``CallTransport``), on its event loop: the HTTP/2
/// connection, and the HTTP/1.1 one that serves web calls.
protocol ServerCallConnection: AnyObject, SendableMetatype {
    /// Queues one response message of call `streamID`.
    func sendResponse(_ payload: ByteBuffer, compressed: Bool, streamID: Int32) -> SendOutcome
    /// Sends the response headers now; false once the call has ended.
    func sendInitialMetadata(streamID: Int32) -> Bool
    /// Parks a writer until the call's send queue drained (or the call ended).
    func waitForSendQueue(streamID: Int32, continuation: UnsafeContinuation<Void, any Error>)
    func cancelResponseWaiter(streamID: Int32)
    /// The handler pulled enough messages: the connection may let the client send more.
    func releaseRequestCredit(streamID: Int32)
    /// The handler of call `streamID` returned or threw: the connection sends the status.
    func handlerFinished(streamID: Int32, outcome: Result<Void, any Error>)
}

enum SendOutcome {
    case queued
    /// Queued, but the call's send queue is above the high watermark: the writer should wait.
    case queueFull
    case callEnded
}

/// The transport of the HTTP/2 connection's calls.
typealias ServerStreamTransport = CallTransport<ServerConnectionHandler>

/// The handler's side of one call: request messages queued by the connection, responses handed back to it.
///
/// The connection (on its event loop) pushes messages in; the handler task, wherever it runs, pulls them. Sending
/// hops to the event loop, and suspends while the call's send queue is above the high watermark. Generic over the
/// connection (not an existential), so the HTTP/2 path calls its connection directly.
final class CallTransport<Connection: ServerCallConnection>: ServerCallTransport {
    let streamID: Int32
    let connection: NIOLoopBound<Connection>
    private let lowWatermark: Int
    private let state: Locked<State>

    private struct State {
        var messages = CircularBuffer<ReceivedMessage>(initialCapacity: 1)
        var finished = false
        var failure: (any Error)?
        var waiter: CheckedContinuation<ReceivedMessage?, any Error>?
        /// The connection holds back flow-control credit until the queue drains below the low watermark.
        var creditWithheld = false
    }

    init(streamID: Int32, connection: NIOLoopBound<Connection>, requestQueueHighWatermark: Int) {
        self.streamID = streamID
        self.connection = connection
        self.lowWatermark = max(requestQueueHighWatermark / 2, 1)
        self.state = Locked(State())
    }

    // MARK: Called by the connection, on its event loop

    /// Queues a request message; returns how many messages are now waiting (for flow-control decisions).
    func deliver(_ message: ReceivedMessage) -> Int {
        let waiter: CheckedContinuation<ReceivedMessage?, any Error>?
        let queued: Int
        (waiter, queued) = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, 0)
            }
            state.messages.append(message)
            return (nil, state.messages.count)
        }
        waiter?.resume(returning: message)
        return queued
    }

    /// The request of a call whose request stream ended after exactly one message, taken out of the queue (for a
    /// ``UnaryCallForwarder``); `nil` otherwise.
    func takeOnlyRequest() -> ReceivedMessage? {
        state.withLock { state in
            guard state.finished, state.failure == nil, state.messages.count == 1 else { return nil }
            return state.messages.removeFirst()
        }
    }

    /// Marks that the connection stopped returning flow-control credit because the queue is full.
    func withholdCredit() {
        state.withLock { $0.creditWithheld = true }
    }

    /// The client half-closed: after the queued messages, `nextRequest` returns nil.
    func finishRequests() {
        let waiter = state.withLock { state -> CheckedContinuation<ReceivedMessage?, any Error>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The request stream failed (reset, deadline, bad message): pending and future reads throw `error`.
    func failRequests(_ error: any Error) {
        let waiter = state.withLock { state -> CheckedContinuation<ReceivedMessage?, any Error>? in
            if state.failure == nil { state.failure = error }
            state.messages.removeAll()
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: error)
    }

    // MARK: ServerCallTransport, called by the handler task

    func nextRequest() async throws -> ReceivedMessage? {
        // Fast path: a message is already queued (always the case for unary calls).
        let immediate = state.withLock { state -> Immediate in
            if let failure = state.failure { return .failure(failure) }
            if let message = state.messages.popFirst() {
                let release = state.creditWithheld && state.messages.count < lowWatermark
                if release { state.creditWithheld = false }
                return .message(message, releaseCredit: release)
            }
            return state.finished ? .end : .wait
        }
        switch immediate {
        case .message(let message, let releaseCredit):
            if releaseCredit { releaseFlowControlCredit() }
            return message
        case .end:
            return nil
        case .failure(let error):
            throw error
        case .wait:
            break
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let outcome = state.withLock { state -> Immediate in
                    if let failure = state.failure { return .failure(failure) }
                    if let message = state.messages.popFirst() { return .message(message, releaseCredit: false) }
                    if state.finished { return .end }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiter = continuation
                    return .wait
                }
                switch outcome {
                case .message(let message, _): continuation.resume(returning: message)
                case .end: continuation.resume(returning: nil)
                case .failure(let error): continuation.resume(throwing: error)
                case .wait: break
                }
            }
        } onCancel: {
            failRequests(CancellationError())
        }
    }

    func sendResponse(_ payload: ByteBuffer, compressed: Bool) async throws {
        try Task.checkCancellation()
        let connection = self.connection
        let streamID = self.streamID
        // Fast path: on the connection's loop (handlers run there by default) with room in the send queue, the
        // message is queued synchronously: no continuation, no hop.
        if connection.eventLoop.inEventLoop {
            switch connection.value.sendResponse(payload, compressed: compressed, streamID: streamID) {
            case .queued: return
            case .callEnded: throw RPCError(.cancelled, "the call has ended")
            case .queueFull: break
            }
            try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                    connection.value.waitForSendQueue(streamID: streamID, continuation: continuation)
                }
            } onCancel: {
                connection.eventLoop.execute { connection.value.cancelResponseWaiter(streamID: streamID) }
            }
            return
        }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                connection.eventLoop.execute {
                    let handler = connection.value
                    switch handler.sendResponse(payload, compressed: compressed, streamID: streamID) {
                    case .queued: continuation.resume()
                    case .callEnded: continuation.resume(throwing: RPCError(.cancelled, "the call has ended"))
                    case .queueFull: handler.waitForSendQueue(streamID: streamID, continuation: continuation)
                    }
                }
            }
        } onCancel: {
            connection.eventLoop.execute { connection.value.cancelResponseWaiter(streamID: streamID) }
        }
    }

    func sendInitialMetadata() async throws {
        let connection = self.connection
        let streamID = self.streamID
        let sent =
            connection.eventLoop.inEventLoop
            ? connection.value.sendInitialMetadata(streamID: streamID)
            : try await connection.eventLoop.submit { connection.value.sendInitialMetadata(streamID: streamID) }.get()
        guard sent else { throw RPCError(.cancelled, "the call has ended") }
    }

    private func releaseFlowControlCredit() {
        let connection = self.connection
        let streamID = self.streamID
        connection.eventLoop.executeOrRunNow { connection.value.releaseRequestCredit(streamID: streamID) }
    }
}

/// What ``CallTransport/nextRequest()`` finds in the queue without waiting (not nested: the transport is generic).
private enum Immediate {
    case message(ReceivedMessage, releaseCredit: Bool)
    case end
    case failure(any Error)
    case wait
}
