internal import HabitFlowLocking
internal import HabitFlowRPC
internal import NIOCore

/// One call as its caller sees it: one or more attempts (streams), retried when the policy allows, and the
/// interceptors told once when it ends.
final class ClientCall: ClientCallStream {
    private let channel: RPCChannel
    /// Told when the call ends: the channel's, or none for a call that bypassed them.
    private let interceptors: [any ClientInterceptor]
    private let details: ClientCallDetails
    private let request: ClientRequest
    private let started = ContinuousClock.now
    private let state = Locked(State())

    private struct State {
        var attempt: ClientStreamTransport?
        var attempts = 0
        /// Response headers arrived: the call is committed to the current attempt.
        var committed = false
        var initialMetadata: Metadata?
        var trailers = Metadata()
        var end: AttemptEnd?
    }

    init(
        channel: RPCChannel, interceptors: [any ClientInterceptor], details: ClientCallDetails,
        singleRequest: ByteBuffer?
    ) {
        self.channel = channel
        self.interceptors = interceptors
        self.details = details
        let options = details.options
        self.request = ClientRequest(
            method: details.method, metadata: options.metadata, deadline: options.effectiveDeadline(startingAt: started),
            compression: options.compression,
            maxReceiveMessageSize: options.maxReceiveMessageSize ?? channel.configuration.maxReceiveMessageSize,
            singleRequest: singleRequest)
    }

    /// Opens the first attempt (connecting if needed).
    func start() async throws {
        do {
            try await openAttempt()
        } catch {
            let failure = error as? RPCError ?? channel.configuration.unavailable("\(error)")
            finish(.failed(failure, processed: false))
            throw failure
        }
    }

    /// Picks a connection and opens a stream on it, waiting and trying again while the retry policy allows.
    private func openAttempt() async throws {
        while true {
            do {
                let connection = try await channel.pickConnection(deadline: request.deadline)
                let attempt = ClientStreamTransport(
                    connection: connection.handler, request: request,
                    responseQueueHighWatermark: channel.configuration.responseQueueHighWatermark)
                let accepted = state.withLock { state -> Bool in
                    guard state.end == nil else { return false }
                    state.attempt = attempt
                    state.attempts += 1
                    return true
                }
                guard accepted else { throw RPCError(.cancelled, "the call was cancelled") }
                connection.open(attempt)
                return
            } catch let error as RPCError {
                state.withLock { $0.attempts += 1 }
                guard let delay = retryDelay(after: error, processed: true) else { throw error }
                try await Task.sleep(for: delay)
            }
        }
    }

    /// How long to wait before the next attempt, or `nil` when the call must fail with `error`.
    private func retryDelay(after error: RPCError, processed: Bool) -> Duration? {
        let policy = channel.configuration.retry
        let (attempts, committed, ended) = state.withLock { ($0.attempts, $0.committed, $0.end != nil) }
        guard request.singleRequest != nil, !committed, !ended, attempts < policy.maxAttempts else { return nil }
        var delay = Duration.zero
        guard RetryRule.allowsAttempt(after: error, processed: processed, idempotent: details.options.idempotent == true)
        else { return nil }
        if processed {
            // Only within the channel's budget.
            guard channel.throttle.recordFailure() else { return nil }
            let ceiling = min(
                policy.initialBackoff.seconds * pow(policy.backoffMultiplier, Double(attempts - 1)),
                policy.maxBackoff.seconds)
            delay = .seconds(Double.random(in: 0...max(ceiling, 0)))
        }
        if let deadline = request.deadline, .now + delay >= deadline { return nil }
        return delay
    }

    // MARK: Reading

    /// The next part of the current attempt, starting new attempts while failures are retryable.
    private func nextPart() async throws -> ResponsePart {
        while true {
            let (attempt, end) = state.withLock { ($0.attempt, $0.end) }
            if let end { return .end(end) }
            guard let attempt else { return .end(.failed(RPCError(.internal, "the call has no stream"), processed: true)) }
            // A part already queued (the usual case once the headers are in) needs no cancellation handler, whose
            // installation takes the task's status lock; a cancelled task takes the handler path and is cancelled.
            let part: ResponsePart
            if !Task.isCancelled, let available = attempt.availablePart() {
                part = available
            } else {
                part = await withTaskCancellationHandler {
                    await attempt.nextPart()
                } onCancel: {
                    self.cancel()
                }
            }
            switch part {
            case .headers:
                state.withLock { $0.committed = true }
                return part
            case .message, .end(.ok):
                return part
            case .end(.failed(let error, let processed)):
                if let end = state.withLock({ $0.end }) { return .end(end) }
                guard let delay = retryDelay(after: error, processed: processed) else { return part }
                do {
                    if delay > .zero { try await Task.sleep(for: delay) }
                    try await openAttempt()
                } catch {
                    return .end(.failed(error as? RPCError ?? RPCError(.cancelled, "the call was cancelled"), processed: true))
                }
            }
        }
    }

    func initialMetadata() async throws -> Metadata {
        if let metadata = state.withLock({ $0.initialMetadata }) { return metadata }
        switch try await nextPart() {
        case .headers(let metadata):
            state.withLock { $0.initialMetadata = metadata }
            return metadata
        case .end(let end):
            finish(end)
            state.withLock { $0.initialMetadata = Metadata() }
            if case .failed(let error, _) = end { throw error }
            return Metadata()
        case .message:
            throw RPCError(.internal, "a response message arrived before the response headers")
        }
    }

    func nextReceivedMessage() async throws -> ReceivedMessage? {
        if state.withLock({ $0.initialMetadata == nil }) { _ = try await initialMetadata() }
        while true {
            switch try await nextPart() {
            case .message(let message):
                return message
            case .end(let end):
                finish(end)
                if case .failed(let error, _) = end { throw error }
                return nil
            case .headers:
                continue
            }
        }
    }

    var trailers: Metadata { state.withLock { $0.trailers } }

    // MARK: Sending

    func send(_ message: ByteBuffer) async throws {
        guard let attempt = state.withLock({ $0.attempt }) else { throw RPCError(.cancelled, "the call has ended") }
        try await withTaskCancellationHandler {
            try await attempt.send(message)
        } onCancel: {
            self.cancel()
        }
    }

    func finishRequests() async {
        state.withLock { $0.attempt }?.finishRequests()
    }

    // MARK: Ending

    func cancel() {
        let attempt = state.withLock { $0.end == nil ? $0.attempt : nil }
        finish(.failed(RPCError(.cancelled, "the call was cancelled"), processed: true))
        attempt?.cancel()
    }

    /// Records how the call ended (the first end wins) and tells the interceptors.
    private func finish(_ end: AttemptEnd) {
        let first = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.end = end
            if case .ok(let trailers) = end { state.trailers = trailers }
            if case .failed(let error, _) = end { state.trailers = error.trailers }
            return true
        }
        guard first else { return }
        let status: RPCStatus
        switch end {
        case .ok:
            status = .ok
            channel.throttle.recordSuccess()
        case .failed(let error, _):
            status = RPCStatus(code: error.code, message: error.message, details: error.details)
        }
        guard !interceptors.isEmpty else { return }
        let duration = ContinuousClock.now - started
        for interceptor in interceptors {
            interceptor.didFinish(details, status: status, duration: duration)
        }
    }
}

private func pow(_ base: Double, _ exponent: Double) -> Double {
    var result = 1.0
    for _ in 0..<max(Int(exponent), 0) { result *= base }
    return result
}
