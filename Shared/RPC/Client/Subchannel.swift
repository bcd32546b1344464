internal import HabitFlowLocking
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore

/// One connection slot to one target: connects on demand, reconnects with exponential backoff after failures, and
/// goes idle when its connection is lost or told to go away (the next call connects anew).
final class Subchannel: Sendable {
    let target: RPCChannelConfiguration.Target
    private let configuration: RPCChannelConfiguration
    private let tlsContext: TLSContext?
    private let keepaliveInterval: KeepaliveInterval
    let eventLoop: any EventLoop
    private let logger: Logger
    private let state = Locked(State())

    private enum Phase {
        case idle
        case connecting(EventLoopFuture<ClientConnection>)
        case ready(ClientConnection)
        /// The last attempt failed; calls fail fast until the next attempt, which starts by itself.
        case backingOff(until: ContinuousClock.Instant, reason: String)
        case shutdown
    }

    private struct State {
        var phase = Phase.idle
        var consecutiveFailures = 0
    }

    init(
        target: RPCChannelConfiguration.Target, configuration: RPCChannelConfiguration, tlsContext: TLSContext?,
        keepaliveInterval: KeepaliveInterval, eventLoop: any EventLoop, logger: Logger
    ) {
        self.target = target
        self.configuration = configuration
        self.tlsContext = tlsContext
        self.keepaliveInterval = keepaliveInterval
        self.eventLoop = eventLoop
        self.logger = logger
    }

    /// The ready connection, if any. An idle subchannel starts connecting (for later calls) and returns `nil`.
    func readyConnection() -> ClientConnection? {
        enum Outcome {
            case connection(ClientConnection)
            case connect
            case none
        }
        let outcome = state.withLock { state -> Outcome in
            switch state.phase {
            case .ready(let connection) where connection.acceptsCalls: return .connection(connection)
            case .idle, .ready: return .connect
            case .connecting, .backingOff, .shutdown: return .none
            }
        }
        switch outcome {
        case .connection(let connection): return connection
        case .connect: _ = connect()
        case .none: break
        }
        return nil
    }

    /// A ready connection: the current one, the one being set up, or a new one. Fails at once while backing off.
    func connect() -> EventLoopFuture<ClientConnection> {
        enum Action {
            case done(ClientConnection)
            case wait(EventLoopFuture<ClientConnection>)
            case fail(RPCError)
            case start(EventLoopPromise<ClientConnection>)
        }
        let action = state.withLock { state -> Action in
            switch state.phase {
            case .ready(let connection) where connection.acceptsCalls:
                return .done(connection)
            case .connecting(let future):
                return .wait(future)
            case .backingOff(let until, let reason):
                let wait = max(until - .now, .zero)
                return .fail(
                    configuration.unavailable(
                        "\(target) is unavailable (\(reason)); reconnecting in \(wait.formatted())"))
            case .shutdown:
                return .fail(RPCError(.unavailable, "the channel is closed"))
            case .idle, .ready:
                let promise = eventLoop.makePromise(of: ClientConnection.self)
                state.phase = .connecting(promise.futureResult)
                return .start(promise)
            }
        }
        switch action {
        case .done(let connection): return eventLoop.makeSucceededFuture(connection)
        case .wait(let future): return future
        case .fail(let error): return eventLoop.makeFailedFuture(error)
        case .start(let promise):
            ClientConnection.connect(
                to: target, configuration: configuration, tlsContext: tlsContext, keepaliveInterval: keepaliveInterval,
                eventLoop: eventLoop, logger: logger
            ) { [weak self] identity in
                self?.connectionUnusable(identity)
            }.whenComplete { result in
                self.connectFinished(result)
                promise.completeWith(result)
            }
            return promise.futureResult
        }
    }

    private func connectFinished(_ result: Result<ClientConnection, any Error>) {
        switch result {
        case .success(let connection):
            let keep = state.withLock { state -> Bool in
                guard case .connecting = state.phase else { return false }
                state.consecutiveFailures = 0
                state.phase = connection.acceptsCalls ? .ready(connection) : .idle
                return true
            }
            if keep {
                logger.debug("connected", metadata: ["target": "\(target)"])
            } else {
                connection.close()
            }
        case .failure(let error):
            let delay = state.withLock { state -> Duration? in
                guard case .connecting = state.phase else { return nil }
                state.consecutiveFailures += 1
                let delay = configuration.backoff.delay(afterFailures: state.consecutiveFailures)
                state.phase = .backingOff(until: .now + delay, reason: Self.reason(error))
                return delay
            }
            guard let delay else { return }
            logger.debug(
                "connection attempt failed; backing off",
                metadata: ["target": "\(target)", "error": "\(error)", "delay": "\(delay)"])
            eventLoop.scheduleTask(in: TimeAmount(delay)) { [weak self] in self?.backoffEnded() }
        }
    }

    /// What a failed attempt says in the next ones' cause: the cause of the error it made, not its message.
    private static func reason(_ error: any Error) -> String {
        if let error = error as? RPCError, let cause = error.cause { return "\(cause)" }
        return "\(error)"
    }

    private func backoffEnded() {
        let reconnect = state.withLock { state -> Bool in
            guard case .backingOff = state.phase else { return false }
            state.phase = .idle
            return true
        }
        if reconnect { _ = connect() }
    }

    private func connectionUnusable(_ identity: ObjectIdentifier) {
        state.withLock { state in
            if case .ready(let connection) = state.phase, ObjectIdentifier(connection.state) == identity {
                state.phase = .idle
            }
        }
    }

    /// Closes the connection; later calls fail `UNAVAILABLE`.
    func shutdown() -> (any Channel)? {
        let connection = state.withLock { state -> ClientConnection? in
            defer { state.phase = .shutdown }
            if case .ready(let connection) = state.phase { return connection }
            return nil
        }
        connection?.close()
        return connection?.channel
    }
}

/// The retry budget of a channel (gRFC A6 retry throttling): a token bucket drained by failed attempts and
/// refilled by successful calls; retries pause while half or less of it is left.
final class RetryThrottle: Sendable {
    private let maxTokens: Double
    private let tokenRatio: Double
    private let tokens: Locked<Double>

    init(maxTokens: Double, tokenRatio: Double) {
        self.maxTokens = maxTokens
        self.tokenRatio = tokenRatio
        self.tokens = Locked(maxTokens)
    }

    /// Records a failed attempt; true when a retry is still within budget.
    func recordFailure() -> Bool {
        tokens.withLock { tokens in
            tokens = max(tokens - 1, 0)
            return tokens > maxTokens / 2
        }
    }

    func recordSuccess() {
        tokens.withLock { $0 = min($0 + tokenRatio, maxTokens) }
    }
}
