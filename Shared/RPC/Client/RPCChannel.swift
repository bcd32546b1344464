internal import HabitFlowLocking
public import HabitFlowRPC
internal import HabitFlowTLS
public import Logging
public import NIOCore
public import NIOPosix
internal import Synchronization

/// A gRPC client channel: calls multiplexed over HTTP/2 connections (nghttp2) to one or more targets, picked
/// round-robin, with reconnection, deadlines, retries of idempotent calls and client interceptors.
///
/// Generated clients take it as their transport:
///
/// ```swift
/// let channel = try RPCChannel(configuration: .init(host: "127.0.0.1", port: 7072), logger: logger)
/// let habits = Habitflow_Habits_V1_HabitsService.Client(transport: channel)
/// let habit = try await habits.getHabit(request, options: CallOptions(timeout: .seconds(2)))
/// ...
/// await channel.close()
/// ```
public final class RPCChannel: RPCClientTransport {
    public let configuration: RPCChannelConfiguration
    let interceptors: [any ClientInterceptor]
    let throttle: RetryThrottle
    let logger: Logger
    private let subchannels: [Subchannel]
    private let group: any EventLoopGroup
    private let nextPick = Atomic<Int>(0)

    /// - Parameters:
    ///   - interceptors: run in order before every call and again when it ended.
    ///   - logger: connection events at debug and info level; calls are not logged unless an interceptor does.
    public init(
        configuration: RPCChannelConfiguration,
        interceptors: [any ClientInterceptor] = [],
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws {
        precondition(configuration.connectionsPerTarget >= 1, "connectionsPerTarget must be at least 1")
        let tlsContext = try configuration.tls.map { try TLSContext(configuration: $0) }
        let keepaliveInterval = KeepaliveInterval(configuration.keepalive?.interval ?? .seconds(5 * 60))
        // The connections of one target go to distinct loops (as far as there are loops), so that with one per loop
        // every caller on a loop finds one there (see `sameTargetOnCurrentEventLoop`); channels start at the group's
        // next loop, so single-connection channels still spread over the loops.
        let loops = Array(group.makeIterator())
        let first = group.next()
        let offset = loops.firstIndex { $0 === first } ?? 0
        var subchannels: [Subchannel] = []
        for connection in 0..<configuration.connectionsPerTarget {
            for (index, target) in configuration.targets.enumerated() {
                let eventLoop = loops.isEmpty ? group.next() : loops[(offset + index + connection) % loops.count]
                subchannels.append(
                    Subchannel(
                        target: target, configuration: configuration, tlsContext: tlsContext,
                        keepaliveInterval: keepaliveInterval, eventLoop: eventLoop, logger: logger))
            }
        }
        self.configuration = configuration
        self.interceptors = interceptors
        self.throttle = RetryThrottle(
            maxTokens: configuration.retry.maxTokens, tokenRatio: configuration.retry.tokenRatio)
        self.logger = logger
        self.subchannels = subchannels
        self.group = group
    }

    public func startCall(
        _ method: MethodDescriptor, options: CallOptions, singleRequest: ByteBuffer?
    ) async throws -> any ClientCallStream {
        var details = ClientCallDetails(method: method, options: options)
        for interceptor in interceptors {
            try await interceptor.willStart(&details)
        }
        return try await start(details, interceptors: interceptors, singleRequest: singleRequest)
    }

    /// This channel's connections, retries and deadlines without its interceptors: for calls whose metadata is
    /// complete already, such as a gateway's forwarded calls, signed by the gateway for the user it authenticated.
    public var bypassingInterceptors: any RPCClientTransport { intercepted(by: []) }

    /// This channel's connections, retries and deadlines with `interceptors` instead of its own: for calls of the
    /// same process that need another identity (the gateway's export signs its calls as `gateway-export`).
    public func intercepted(by interceptors: [any ClientInterceptor]) -> any RPCClientTransport {
        InterceptedChannel(channel: self, interceptors: interceptors)
    }

    fileprivate func start(
        _ details: ClientCallDetails, interceptors: [any ClientInterceptor], singleRequest: ByteBuffer?
    ) async throws -> any ClientCallStream {
        let call = ClientCall(channel: self, interceptors: interceptors, details: details, singleRequest: singleRequest)
        try await call.start()
        return call
    }

    /// Starts a unary call on a ready connection on the caller's event loop, its response going to `receiver` on that
    /// loop as it arrives: no task, no client call object, no thread hop (a gateway's fast path). No interceptors run
    /// and nothing is retried here (`receiver` learns when a retry would be allowed). `nil`, with nothing sent, when
    /// the caller is not on an event loop or the connection the channel would pick is not ready there.
    public func forwardOnCurrentEventLoop(
        _ method: MethodDescriptor, options: CallOptions, request: ByteBuffer, to receiver: any ForwardedResponseReceiver
    ) -> ForwardedCall? {
        guard let current = MultiThreadedEventLoopGroup.currentEventLoop, let connection = pickReadyConnection(),
            connection.eventLoop === current
        else { return nil }
        let attempt = ClientStreamTransport(
            connection: connection.handler,
            request: ClientRequest(
                method: method, metadata: options.metadata, deadline: options.effectiveDeadline(startingAt: .now),
                compression: options.compression,
                maxReceiveMessageSize: options.maxReceiveMessageSize ?? configuration.maxReceiveMessageSize,
                singleRequest: request),
            responseQueueHighWatermark: configuration.responseQueueHighWatermark,
            forwardingTo: .init(receiver, idempotent: options.idempotent == true, throttle: throttle))
        connection.handler.value.open(attempt)
        return ForwardedCall(attempt: attempt)
    }

    /// Connects to every target now rather than on the first call; succeeds when at least one connection is ready.
    public func connect() async throws {
        _ = try await pickConnection(deadline: .now + configuration.connectTimeout)
        for subchannel in subchannels { _ = subchannel.readyConnection() }
    }

    /// Closes every connection; calls in flight fail `UNAVAILABLE`, later calls too.
    public func close() async {
        let channels = subchannels.compactMap { $0.shutdown() }
        for channel in channels {
            try? await channel.closeFuture.get()
        }
    }

    // MARK: Picking a connection

    /// A ready connection, round-robin over the ready ones; when none is ready, the first to finish connecting.
    func pickConnection(deadline: ContinuousClock.Instant?) async throws -> ClientConnection {
        if let ready = pickReadyConnection() { return ready }
        let attempts = subchannels.map { $0.connect() }
        let race = ConnectionRace(count: attempts.count)
        let eventLoop = group.next()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.begin(continuation)
                let timer = deadline.map { deadline in
                    eventLoop.scheduleTask(in: TimeAmount(max(deadline - .now, .zero))) {
                        race.finish(.failure(RPCError(.deadlineExceeded, "deadline exceeded while connecting")))
                    }
                }
                for attempt in attempts {
                    attempt.whenComplete { result in
                        if race.complete(result) { timer?.cancel() }
                    }
                }
            }
        } onCancel: {
            race.finish(.failure(RPCError(.cancelled, "the call was cancelled")))
        }
    }
}

extension RPCChannel {
    /// A ready connection, round-robin over the ready ones (preferring one to the same target on the caller's loop);
    /// `nil` when none is ready.
    fileprivate func pickReadyConnection() -> ClientConnection? {
        // One target: round-robin has nothing to balance, and the ready connection on the caller's loop is what the
        // general path below ends up with anyway; found without listing the ready ones (every call comes here).
        if configuration.targets.count == 1, let current = MultiThreadedEventLoopGroup.currentEventLoop {
            for subchannel in subchannels where subchannel.eventLoop === current {
                if let connection = subchannel.readyConnection() { return connection }
            }
        }
        // Round-robin over the ready connections only: skipping to the next one after an unready one would give
        // that next one twice its share. (Idle subchannels start connecting as a side effect.)
        var ready: [ClientConnection] = []
        ready.reserveCapacity(subchannels.count)
        for subchannel in subchannels {
            if let connection = subchannel.readyConnection() { ready.append(connection) }
        }
        guard !ready.isEmpty else { return nil }
        let picked = ready[nextPick.wrappingAdd(1, ordering: .relaxed).oldValue % ready.count]
        return Self.sameTargetOnCurrentEventLoop(as: picked, among: ready) ?? picked
    }

    /// How many event loops the shared group (the default of channels and servers) has, one per core. As
    /// ``RPCChannelConfiguration/connectionsPerTarget`` it gives each loop its own connection to every target, so
    /// that server handlers calling through the channel never change threads.
    public static var sharedGroupEventLoopCount: Int {
        Array(MultiThreadedEventLoopGroup.singleton.makeIterator()).count
    }

    /// When the caller runs on an event loop (a server handler, or a task preferring an ``EventLoopTaskExecutor``) and
    /// the picked connection lives on another, a ready connection to the same target on the caller's loop instead: the
    /// call then starts and completes without a thread hop. Same target, so the balance across replicas is unchanged.
    fileprivate static func sameTargetOnCurrentEventLoop(
        as picked: ClientConnection, among ready: [ClientConnection]
    ) -> ClientConnection? {
        guard let current = MultiThreadedEventLoopGroup.currentEventLoop, picked.eventLoop !== current else { return nil }
        return ready.first { $0.eventLoop === current && $0.target == picked.target }
    }
}

/// A call started with ``RPCChannel/forwardOnCurrentEventLoop(_:options:request:to:)``.
public struct ForwardedCall: Sendable {
    fileprivate let attempt: ClientStreamTransport

    /// RST_STREAM(CANCEL) to the server and a `CANCELLED` end to the receiver, unless the call ended already.
    public func cancel() {
        attempt.cancel()
    }
}

/// See ``RPCChannel/bypassingInterceptors``.
private struct InterceptedChannel: RPCClientTransport {
    let channel: RPCChannel
    let interceptors: [any ClientInterceptor]

    func startCall(
        _ method: MethodDescriptor, options: CallOptions, singleRequest: ByteBuffer?
    ) async throws -> any ClientCallStream {
        var details = ClientCallDetails(method: method, options: options)
        for interceptor in interceptors {
            try await interceptor.willStart(&details)
        }
        return try await channel.start(details, interceptors: interceptors, singleRequest: singleRequest)
    }
}

/// Waits for the first of several connection attempts to succeed, or for all of them to fail.
private final class ConnectionRace: Sendable {
    private struct State {
        var continuation: CheckedContinuation<ClientConnection, any Error>?
        var remaining: Int
        var lastError: (any Error)?
        var finished = false
    }

    private let state: Locked<State>

    init(count: Int) {
        state = Locked(State(remaining: count))
    }

    func begin(_ continuation: CheckedContinuation<ClientConnection, any Error>) {
        let early = state.withLock { state -> Result<ClientConnection, any Error>? in
            if state.finished { return .failure(state.lastError ?? RPCError(.cancelled, "the call was cancelled")) }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// One attempt ended; returns true when the race is decided.
    func complete(_ result: Result<ClientConnection, any Error>) -> Bool {
        let decided = state.withLock { state -> Bool in
            state.remaining -= 1
            if case .failure(let error) = result { state.lastError = error }
            if case .success = result { return true }
            return state.remaining <= 0
        }
        if decided {
            switch result {
            case .success: finish(result)
            case .failure:
                finish(.failure(state.withLock { $0.lastError } ?? RPCError(.unavailable, "no connection")))
            }
        }
        return decided
    }

    func finish(_ result: Result<ClientConnection, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<ClientConnection, any Error>? in
            guard !state.finished else { return nil }
            state.finished = true
            if case .failure(let error) = result { state.lastError = error }
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(with: result)
    }
}
