internal import HabitFlowHTTP2
internal import HabitFlowLocking
internal import HabitFlowRPC
internal import NIOCore

/// How one attempt of a call ended.
enum AttemptEnd: Sendable {
    case ok(trailers: Metadata)
    /// `processed` is false when the server never saw the stream (refused, or above a GOAWAY's last stream id):
    /// sending it again is safe for any call.
    case failed(RPCError, processed: Bool)
}

/// What an attempt receives, in order: headers, messages, then its end.
enum ResponsePart: Sendable {
    case headers(Metadata)
    case message(ReceivedMessage)
    case end(AttemptEnd)
}

/// The caller's side of one HTTP/2 stream (one attempt of a call): response parts queued by the connection,
/// requests handed to it.
///
/// The connection pushes parts on its event loop; the calling task pulls them wherever it runs. Everything sent hops
/// to the event loop in order, so operations queued right after ``ClientConnection/open(_:)`` see the stream id.
final class ClientStreamTransport: Sendable {
    let connection: NIOLoopBound<ClientConnectionHandler>
    let request: ClientRequest
    private let lowWatermark: Int
    private let state = Locked(State())
    /// Where the parts go instead of the queue, for a call forwarded on the event loop (see
    /// ``RPCChannel/forwardOnCurrentEventLoop(_:options:request:to:)``).
    private let receiver: ForwardedReceiver?

    /// A class, so that handing it around per part costs one reference count.
    final class ForwardedReceiver: Sendable {
        let receiver: any ForwardedResponseReceiver
        let idempotent: Bool
        /// The channel's retry budget, which successes replenish.
        let throttle: RetryThrottle

        init(_ receiver: any ForwardedResponseReceiver, idempotent: Bool, throttle: RetryThrottle) {
            self.receiver = receiver
            self.idempotent = idempotent
            self.throttle = throttle
        }
    }

    private struct State {
        var parts = CircularBuffer<ResponsePart>(initialCapacity: 2)
        var ended = false
        var waiter: UnsafeContinuation<ResponsePart, Never>?
        var streamID: Int32?
        /// The connection holds back flow-control credit until the queue drains below the low watermark.
        var creditWithheld = false
        /// Response headers were delivered: the call is committed to this attempt (no retry).
        var headersDelivered = false
    }

    init(
        connection: NIOLoopBound<ClientConnectionHandler>, request: ClientRequest, responseQueueHighWatermark: Int,
        forwardingTo receiver: ForwardedReceiver? = nil
    ) {
        self.connection = connection
        self.request = request
        self.lowWatermark = max(responseQueueHighWatermark / 2, 1)
        self.receiver = receiver
    }

    // MARK: Called by the connection, on its event loop

    var streamID: Int32? {
        get { state.withLock { $0.streamID } }
        set { state.withLock { $0.streamID = newValue } }
    }

    /// Queues a part; returns how many messages are now waiting (for flow-control decisions).
    @discardableResult
    func deliver(_ part: ResponsePart) -> Int {
        if let receiver {
            forward(part, to: receiver)
            return 0
        }
        let (waiter, queued) = state.withLock { state -> (UnsafeContinuation<ResponsePart, Never>?, Int) in
            guard !state.ended else { return (nil, 0) }
            if case .end = part { state.ended = true }
            if let waiter = state.waiter {
                state.waiter = nil
                // The end stays queued: every later read returns it too.
                if case .end = part { state.parts.append(part) }
                return (waiter, 0)
            }
            state.parts.append(part)
            return (nil, state.parts.count)
        }
        waiter?.resume(returning: part)
        return queued
    }

    /// Ends the attempt with an error, dropping messages not yet read (cancellation, deadline, lost connection).
    func fail(_ error: RPCError, processed: Bool = true) {
        if let receiver { return forward(.end(.failed(error, processed: processed)), to: receiver) }
        let waiter = state.withLock { state -> UnsafeContinuation<ResponsePart, Never>? in
            guard !state.ended else { return nil }
            state.ended = true
            state.parts.removeAll()
            state.parts.append(.end(.failed(error, processed: processed)))
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .end(.failed(error, processed: processed)))
    }

    func withholdCredit() {
        state.withLock { $0.creditWithheld = true }
    }

    /// A part of a forwarded call, straight to its receiver; nothing after the end.
    private func forward(_ part: ResponsePart, to forwarded: ForwardedReceiver) {
        let (ended, committed) = state.withLock { state -> (Bool, Bool) in
            let ended = state.ended
            switch part {
            case .end: state.ended = true
            case .headers: state.headersDelivered = true
            case .message: break
            }
            return (ended, state.headersDelivered)
        }
        guard !ended else { return }
        switch part {
        case .headers(let metadata):
            forwarded.receiver.receiveHeaders(metadata)
        case .message(let message):
            forwarded.receiver.receiveMessage(message)
        case .end(.ok(let trailers)):
            forwarded.throttle.recordSuccess()
            forwarded.receiver.receiveEnd(.success(trailers), retryable: false)
        case .end(.failed(let error, let processed)):
            // As `ClientCall` decides: a failure the server saw is retried only within the channel's budget.
            let retryable =
                !committed
                && RetryRule.allowsAttempt(after: error, processed: processed, idempotent: forwarded.idempotent)
                && (!processed || forwarded.throttle.recordFailure())
            forwarded.receiver.receiveEnd(.failure(error), retryable: retryable)
        }
    }

    // MARK: Called by the call, from any task

    /// The next part if one is queued already (after `.end`, that end); `nil` when it has to be waited for.
    func availablePart() -> ResponsePart? {
        let (part, releaseCredit) = state.withLock { state -> (ResponsePart?, Bool) in
            guard let part = state.parts.first else { return (nil, false) }
            if case .end = part { return (part, false) }
            state.parts.removeFirst()
            let release = state.creditWithheld && state.parts.count < lowWatermark
            if release { state.creditWithheld = false }
            return (part, release)
        }
        if releaseCredit { releaseFlowControlCredit() }
        return part
    }

    /// The next part; after `.end` it keeps returning that end.
    func nextPart() async -> ResponsePart {
        if let part = availablePart() { return part }
        return await withUnsafeContinuation { continuation in
            let ready = state.withLock { state -> ResponsePart? in
                if let part = state.parts.first {
                    if case .end = part { return part }
                    state.parts.removeFirst()
                    return part
                }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Sends one request message; suspends while the stream's send queue is above the high watermark.
    func send(_ message: ByteBuffer) async throws {
        let connection = self.connection
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
            connection.eventLoop.executeOrRunNow {
                connection.value.sendMessage(message, on: self, whenQueued: continuation)
            }
        }
    }

    func finishRequests() {
        let connection = self.connection
        connection.eventLoop.executeOrRunNow { connection.value.finishRequests(on: self) }
    }

    /// RST_STREAM(CANCEL) and a `CANCELLED` end, unless the attempt already ended.
    func cancel(_ error: RPCError = RPCError(.cancelled, "the call was cancelled")) {
        guard !state.withLock({ $0.ended }) else { return }
        let connection = self.connection
        connection.eventLoop.executeOrRunNow { connection.value.cancelStream(self, error: error) }
    }

    private func releaseFlowControlCredit() {
        let connection = self.connection
        connection.eventLoop.executeOrRunNow { connection.value.releaseResponseCredit(on: self) }
    }
}

/// Which failed attempts a call may repeat: one the server never saw (refused, or above a GOAWAY's last stream
/// id), any call; one it saw, only an idempotent call that failed `UNAVAILABLE`. (Budget, backoff and deadline are
/// the caller's to check.)
enum RetryRule {
    static func allowsAttempt(after error: RPCError, processed: Bool, idempotent: Bool) -> Bool {
        !processed || (error.code == .unavailable && idempotent)
    }
}

/// Everything needed to open the stream of one attempt.
struct ClientRequest: Sendable {
    var method: MethodDescriptor
    var metadata: Metadata
    var deadline: ContinuousClock.Instant?
    var compression: MessageCompression?
    var maxReceiveMessageSize: Int
    /// The request message of a single-request call, sent with the headers and followed by the half-close.
    var singleRequest: ByteBuffer?
}
