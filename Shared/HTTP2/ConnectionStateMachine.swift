public import NIOCore

/// The lifecycle of one HTTP/2 connection, client or server, as a value: events in, ``Action``s out.
///
/// It decides when the connection takes calls, pings, goes away and closes; the channel handler owns the socket, the
/// nghttp2 session and the timers, and only performs the actions. No socket is needed to test it: times are passed
/// in, and timers are actions too (``Timer``).
///
/// Phases: a client starts in ``Phase/starting`` until the server's first SETTINGS; a server starts ``Phase/active``.
/// A server's graceful shutdown (asked for, idle, or at its maximum age) sends the shutdown notice (GOAWAY with the
/// highest stream ID and a PING), then the final GOAWAY one round trip later (or after a second), then drains: it
/// closes when the last call ends or the grace period runs out. A client that receives a GOAWAY drains the same way.
public struct ConnectionStateMachine: Sendable {
    public enum Role: Sendable { case client, server }

    public enum Phase: Sendable, Equatable {
        /// Client only: waiting for the server's first SETTINGS.
        case starting
        /// Takes new calls.
        case active
        /// Server only: shutdown notice sent, final GOAWAY due one round trip later.
        case shutdownNoticeSent
        /// No new calls; closes when the last call ends.
        case draining
        /// Closes once what is queued has been written.
        case closed
    }

    /// The timers a connection may have running; the handler keeps one of each at most.
    public enum Timer: UInt8, Sendable, CaseIterable {
        /// Server: the preface or a header block is overdue (slowloris).
        case header
        /// Server: the connection has had no calls for the idle timeout.
        case idle
        /// Server: the connection reached its maximum age.
        case age
        /// Our keepalive PING is due when nothing was read for the interval.
        case keepalive
        /// Our keepalive PING was not answered in time.
        case keepaliveTimeout
        /// Server: the final GOAWAY, should the shutdown notice's PING not come back.
        case finalGoaway
        /// Server: calls still open when the grace period after the final GOAWAY ends are cancelled.
        case grace
        /// Nothing was written for the memory release delay: the session's idle memory can go back.
        case memoryRelease
    }

    public enum Action: Sendable, Equatable {
        case schedule(Timer, at: NIODeadline)
        case cancel(Timer)
        case sendPing(payload: UInt64)
        /// GOAWAY with the highest stream ID, then a PING with ``shutdownPingPayload`` (the first half of a graceful
        /// shutdown).
        case sendShutdownNotice
        case sendGoaway(HTTP2ErrorCode, debugData: String)
        /// Reset every open stream with CANCEL and fail its call (the grace period is over).
        case cancelAllStreams
        /// Write what is queued, then close; no further reads are handled.
        case closeAfterFlushing
        /// Close without writing (an unanswered keepalive PING: the peer is gone).
        case closeNow
        /// Write what is queued on the next tick (frames were submitted).
        case flush
        /// Give the session's idle memory (see `HTTP2Session.releaseIdleMemory()`) back: nothing was written for a while.
        case releaseIdleMemory
    }

    public struct Configuration: Sendable {
        /// Server: the client's preface and each header block must complete within this (`nil`: no limit).
        public var headerTimeout: TimeAmount?
        /// Server: shut down gracefully after this long without calls (`nil`: never).
        public var idleTimeout: TimeAmount?
        /// Server: shut down gracefully at this age (`nil`: never).
        public var maxAge: TimeAmount?
        /// Server: how long calls may run after the final GOAWAY.
        public var gracePeriod: TimeAmount
        /// Our keepalive pings (`nil`: none).
        public var keepalive: Keepalive?
        /// Server: the peer's pings we tolerate (`nil`: any).
        public var pingPolicy: PingPolicy?
        /// How long after the last write the session's idle memory goes back (`nil`: never). Long enough that a
        /// connection in use never pays for it (a page fault on its next write), short against how long idle
        /// connections stay open.
        public var memoryReleaseDelay: TimeAmount?

        public init(
            headerTimeout: TimeAmount? = nil, idleTimeout: TimeAmount? = nil, maxAge: TimeAmount? = nil,
            gracePeriod: TimeAmount = .seconds(10), keepalive: Keepalive? = nil, pingPolicy: PingPolicy? = nil,
            memoryReleaseDelay: TimeAmount? = nil
        ) {
            self.headerTimeout = headerTimeout
            self.idleTimeout = idleTimeout
            self.maxAge = maxAge
            self.gracePeriod = gracePeriod
            self.keepalive = keepalive
            self.pingPolicy = pingPolicy
            self.memoryReleaseDelay = memoryReleaseDelay
        }
    }

    /// Our side's keepalive (gRFC A8): a PING after `interval` without reading anything, the connection closed when
    /// its answer takes longer than `timeout`.
    public struct Keepalive: Sendable {
        /// The first interval; a client may lengthen it later (``keepaliveTimerFired(now:interval:)``).
        public var interval: TimeAmount
        public var timeout: TimeAmount
        /// Whether to ping a connection without calls (servers always do; a client only when allowed).
        public var withoutCalls: Bool

        public init(interval: TimeAmount, timeout: TimeAmount, withoutCalls: Bool) {
            self.interval = interval
            self.timeout = timeout
            self.withoutCalls = withoutCalls
        }
    }

    /// Ping strikes (gRFC A8): a peer's pings closer together than allowed count as strikes; HEADERS or DATA sent
    /// reset them; one strike over the limit ends the connection with GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
    public struct PingPolicy: Sendable {
        public var minIntervalWithCalls: TimeAmount
        public var permitWithoutCalls: Bool
        public var maxStrikes: Int

        public init(minIntervalWithCalls: TimeAmount, permitWithoutCalls: Bool, maxStrikes: Int) {
            self.minIntervalWithCalls = minIntervalWithCalls
            self.permitWithoutCalls = permitWithoutCalls
            self.maxStrikes = maxStrikes
        }
    }

    public static let shutdownPingPayload: UInt64 = 0x6866_5F73_6875_7464  // "hf_shutd"
    public static let serverKeepalivePingPayload: UInt64 = 0x6866_5F6B_6565_7061  // "hf_keepa"
    public static let clientKeepalivePingPayload: UInt64 = 0x6866_636C_6B65_6570  // "hfclkeep"
    /// How long the shutdown notice's PING may take before the final GOAWAY goes anyway.
    public static let shutdownNoticeRoundTrip = TimeAmount.seconds(1)

    public let role: Role
    public let configuration: Configuration
    public private(set) var phase: Phase
    /// Calls open on the connection.
    public private(set) var openStreams = 0
    /// When the last call ended (or the connection opened): the idle timeout counts from here.
    private var idleSince: NIODeadline
    private var lastRead: NIODeadline
    private var headerProgress: InboundHeaderProgress?
    private var headerTimerArmed = false
    private var keepalivePingOutstanding = false
    private var pingStrikes = 0
    private var lastPeerPing: NIODeadline?
    /// The last write; the memory release timer counts from here.
    private var lastWrite: NIODeadline
    /// Something was written since the session's idle memory last went back (or since the start).
    private var memoryInUse = false
    private var memoryReleaseArmed = false

    public init(role: Role, configuration: Configuration, now: NIODeadline) {
        self.role = role
        self.configuration = configuration
        self.phase = role == .client ? .starting : .active
        self.idleSince = now
        self.lastRead = now
        self.lastWrite = now
        if role == .server, configuration.headerTimeout != nil {
            headerProgress = InboundHeaderProgress(connectionStart: now)
        }
    }

    /// Whether a new call may open a stream.
    public var takesNewStreams: Bool { phase == .active }

    /// The connection is set up (the socket is connected): the timers to start.
    public mutating func start(now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        if let timeout = configuration.headerTimeout, let since = headerProgress?.incompleteSince {
            headerTimerArmed = true
            actions.append(.schedule(.header, at: since + timeout))
        }
        if let idle = configuration.idleTimeout { actions.append(.schedule(.idle, at: now + idle)) }
        if let keepalive = configuration.keepalive {
            actions.append(.schedule(.keepalive, at: now + keepalive.interval))
        }
        if let age = configuration.maxAge { actions.append(.schedule(.age, at: now + age)) }
        return actions
    }

    // MARK: Reading

    /// Bytes arrived from the peer (before the session parses them). Returns the header timer to start, if any.
    public mutating func received(_ bytes: ByteBuffer, now: NIODeadline) -> Action? {
        lastRead = now
        guard headerProgress != nil else { return nil }
        headerProgress!.received(bytes, at: now)
        guard !headerTimerArmed, let timeout = configuration.headerTimeout,
            let since = headerProgress!.incompleteSince
        else { return nil }
        headerTimerArmed = true
        return .schedule(.header, at: since + timeout)
    }

    /// Client: the peer's SETTINGS arrived. True when that makes the connection ready for calls.
    public mutating func settingsReceived() -> Bool {
        guard phase == .starting else { return false }
        phase = .active
        return true
    }

    /// The peer sent GOAWAY: no new calls here. A server's GOAWAY to a client drains the client's connection; a
    /// client's GOAWAY to a server changes nothing, the server finishes the calls it has.
    public mutating func goawayReceived() -> Action? {
        guard role == .client else { return nil }
        switch phase {
        case .starting, .active, .shutdownNoticeSent:
            phase = .draining
            return closeIfDrained()
        case .draining, .closed:
            return nil
        }
    }

    /// A PING from the peer (nghttp2 answers it). Server: counts strikes, and ends the connection when they run out.
    public mutating func pingReceived(now: NIODeadline) -> [Action] {
        guard let policy = configuration.pingPolicy else { return [] }
        let minimum =
            openStreams > 0 || policy.permitWithoutCalls ? policy.minIntervalWithCalls : .hours(2)
        if let lastPeerPing, now - lastPeerPing < minimum { pingStrikes += 1 }
        lastPeerPing = now
        guard pingStrikes > policy.maxStrikes else { return [] }
        phase = .closed
        return [.sendGoaway(.enhanceYourCalm, debugData: "too_many_pings"), .closeAfterFlushing]
    }

    /// Bytes were written to the peer. Returns the memory release timer to start, if it is not running: one timer per
    /// quiet spell, not one per write.
    public mutating func wrote(now: NIODeadline) -> Action? {
        lastWrite = now
        memoryInUse = true
        guard !memoryReleaseArmed, let delay = configuration.memoryReleaseDelay else { return nil }
        memoryReleaseArmed = true
        return .schedule(.memoryRelease, at: Self.onWholeSecond(now + delay))
    }

    /// `deadline` rounded up to a whole second of the uptime clock: the memory release timers of many connections
    /// then fire together, one wake-up of the event loop for all, not one each (at 10,000 connections and 200 calls a
    /// second, one each cost the gateway about 2.5 more system calls per call: timerfd and epoll).
    static func onWholeSecond(_ deadline: NIODeadline) -> NIODeadline {
        let second: UInt64 = 1_000_000_000
        return .uptimeNanoseconds((deadline.uptimeNanoseconds + second - 1) / second * second)
    }

    /// HEADERS or DATA went out: the peer's ping strikes start over (gRFC A8).
    public mutating func streamFrameSent() {
        pingStrikes = 0
        lastPeerPing = nil
    }

    /// The answer to one of our PINGs. It stops the keepalive timeout, and it is the round trip a shutdown notice
    /// waits for. (nghttp2 does not hand over the payload of an acknowledgement; any answer proves the peer alive.)
    public mutating func pingAcknowledged(now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        if keepalivePingOutstanding {
            keepalivePingOutstanding = false
            actions.append(.cancel(.keepaliveTimeout))
        }
        if phase == .shutdownNoticeSent {
            actions.append(.cancel(.finalGoaway))
            actions += sendFinalGoaway(now: now)
        }
        return actions
    }

    // MARK: Calls

    /// A call opened a stream.
    public mutating func streamOpened() {
        openStreams += 1
    }

    /// A call's stream closed. Returns `.closeAfterFlushing`... when that was the last call of a draining
    /// connection.
    public mutating func streamClosed(now: NIODeadline) -> Action? {
        openStreams -= 1
        guard openStreams == 0 else { return nil }
        idleSince = now
        return closeIfDrained()
    }

    /// Every stream is gone at once (the grace period ended).
    private mutating func allStreamsClosed(now: NIODeadline) {
        openStreams = 0
        idleSince = now
    }

    private mutating func closeIfDrained() -> Action? {
        guard phase == .draining, openStreams == 0 else { return nil }
        phase = .closed
        return .flush  // the flush finds the phase closed and closes
    }

    // MARK: Shutting down

    /// Server: finish the open calls and close (a server shutting down, idle, or at its maximum age).
    public mutating func beginGracefulShutdown(now: NIODeadline) -> [Action] {
        guard role == .server, phase == .active else { return [] }
        phase = .shutdownNoticeSent
        return [.sendShutdownNotice, .schedule(.finalGoaway, at: now + Self.shutdownNoticeRoundTrip), .flush]
    }

    private mutating func sendFinalGoaway(now: NIODeadline) -> [Action] {
        guard phase == .shutdownNoticeSent else { return [] }
        phase = openStreams == 0 ? .closed : .draining
        var actions: [Action] = [.sendGoaway(.noError, debugData: "")]
        if phase == .draining { actions.append(.schedule(.grace, at: now + configuration.gracePeriod)) }
        actions.append(.flush)
        return actions
    }

    /// The connection is done: it failed (a protocol error, a flood, a session that cannot send; what is queued,
    /// a GOAWAY for one, is still written), the peer closed its side, or the socket went away.
    public mutating func close() {
        phase = .closed
    }

    // MARK: Timers

    public mutating func timerFired(_ timer: Timer, now: NIODeadline) -> [Action] {
        switch timer {
        case .header: return headerTimerFired(now: now)
        case .idle: return idleTimerFired(now: now)
        case .age: return beginGracefulShutdown(now: now)
        case .keepalive:
            guard let keepalive = configuration.keepalive else { return [] }
            return keepaliveTimerFired(now: now, interval: keepalive.interval)
        case .keepaliveTimeout:
            keepalivePingOutstanding = false
            phase = .closed
            return [.closeNow]
        case .finalGoaway: return sendFinalGoaway(now: now)
        case .memoryRelease: return memoryReleaseTimerFired(now: now)
        case .grace:
            guard phase == .draining else { return [] }
            phase = .closed
            allStreamsClosed(now: now)
            return [.cancelAllStreams, .closeAfterFlushing]
        }
    }

    /// The keepalive timer, with the interval in force now (a client told it pings too often pings less).
    public mutating func keepaliveTimerFired(now: NIODeadline, interval: TimeAmount) -> [Action] {
        guard let keepalive = configuration.keepalive else { return [] }
        var actions: [Action] = []
        if phase != .closed, !keepalivePingOutstanding, now - lastRead >= interval,
            openStreams > 0 || keepalive.withoutCalls
        {
            keepalivePingOutstanding = true
            let payload = role == .server ? Self.serverKeepalivePingPayload : Self.clientKeepalivePingPayload
            actions += [.sendPing(payload: payload), .schedule(.keepaliveTimeout, at: now + keepalive.timeout), .flush]
        }
        actions.append(.schedule(.keepalive, at: now + interval))
        return actions
    }

    private mutating func headerTimerFired(now: NIODeadline) -> [Action] {
        headerTimerArmed = false
        guard let timeout = configuration.headerTimeout, let since = headerProgress?.incompleteSince else { return [] }
        guard now - since >= timeout else {
            headerTimerArmed = true
            return [.schedule(.header, at: since + timeout)]
        }
        phase = .closed
        return [.sendGoaway(.enhanceYourCalm, debugData: "header_timeout"), .closeAfterFlushing]
    }

    private mutating func memoryReleaseTimerFired(now: NIODeadline) -> [Action] {
        memoryReleaseArmed = false
        guard let delay = configuration.memoryReleaseDelay, memoryInUse, phase != .closed else { return [] }
        guard now - lastWrite >= delay else {
            memoryReleaseArmed = true
            return [.schedule(.memoryRelease, at: Self.onWholeSecond(lastWrite + delay))]
        }
        memoryInUse = false
        return [.releaseIdleMemory]
    }

    private mutating func idleTimerFired(now: NIODeadline) -> [Action] {
        guard let idleTimeout = configuration.idleTimeout else { return [] }
        let idleFor = now - idleSince
        if openStreams == 0 && idleFor >= idleTimeout { return beginGracefulShutdown(now: now) }
        return [.schedule(.idle, at: openStreams == 0 ? idleSince + idleTimeout : now + idleTimeout)]
    }
}
