public import NIOCore

/// The part of an HTTP/2 connection handler that client and server share: the session's output drained into one
/// reused buffer and written with one flush per event-loop tick (none during a read burst: `channelReadComplete`
/// flushes), and the actions of the connection's ``ConnectionStateMachine`` performed (timers, pings, GOAWAY,
/// closing).
///
/// A conforming handler keeps the state; the role-specific parts (what its events mean, who waits for room to
/// write) are the requirements without a default.
public protocol HTTP2ConnectionShell: ConnectionTimerOwner, SendableMetatype {
    var session: HTTP2Session? { get }
    /// From `handlerAdded` to `handlerRemoved` only.
    var context: ChannelHandlerContext? { get }
    var output: HTTP2ConnectionOutput { get set }
    var state: ConnectionStateMachine { get set }
    var timers: ConnectionTimers { get set }

    /// Events the session produced while its output was drained (frames sent, streams closed).
    func handle(_ events: [HTTP2Event])
    /// The socket took what was queued: callers waiting for room to write may go on.
    func resumeWriters()
    /// The session failed while producing output; the connection closes.
    func sessionFailedWhileSending(_ error: any Error)
    /// The grace period ended: reset and fail every call still open.
    func cancelAllStreams()
    /// Called before each action is performed, for the handler's log.
    func willPerform(_ action: ConnectionStateMachine.Action)
}

/// The output side of a connection (see ``HTTP2ConnectionShell``).
public struct HTTP2ConnectionOutput {
    /// False until the TLS handshake (and its ALPN check) completed, when there is one.
    public var enabled: Bool
    /// Inside `channelRead` calls, before `channelReadComplete`: flushes wait for the end of the burst.
    public var inReadBurst = false
    fileprivate var flushScheduled = false
    fileprivate var buffer = ReusableOutputBuffer(allocator: ByteBufferAllocator())

    public init(enabled: Bool) {
        self.enabled = enabled
    }
}

extension HTTP2ConnectionShell {
    /// What one flush takes from the session at most: a peer that stops reading leaves at most this much (plus the
    /// channel's write buffer watermark) queued in the channel, not everything its flow-control windows allow.
    public static var maxFlushBytes: Int { 1 << 20 }

    /// Flushes on the next tick, unless a read burst is on (its end flushes) or a flush is already due.
    public func scheduleFlush() {
        guard !output.inReadBurst, !output.flushScheduled, let context else { return }
        output.flushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let shell = bound.value
            shell.output.flushScheduled = false
            shell.flushOutput()
        }
    }

    /// Writes what the session has to send in one buffer and one flush, up to ``maxFlushBytes``; the rest goes in
    /// the next flush, at once while the channel stays writable, otherwise when it becomes writable again. Closes
    /// the connection once the state machine says closed (or the session is done) and what was queued is written.
    public func flushOutput() {
        guard let context else { return }
        guard output.enabled, let session else {
            if state.phase == .closed { context.close(promise: nil) }
            return
        }
        guard context.channel.isWritable else { return }
        var buffer = output.buffer.take()
        for _ in 0..<8 {
            do {
                let events = try session.drainOutput(into: &buffer, limit: Self.maxFlushBytes)
                guard !events.isEmpty else { break }
                handle(events)
            } catch {
                sessionFailedWhileSending(error)
                state.close()
                break
            }
            if !session.wantsWrite { break }
        }
        // A connection without calls keeps no buffer for its next flush (which may be minutes away).
        if state.openStreams > 0 { output.buffer.keep(buffer) } else { output.buffer.release() }
        if buffer.readableBytes > 0 {
            context.writeAndFlush(NIOAny(buffer), promise: nil)
            if let action = state.wrote(now: .now()) { perform(action) }
        }
        // Writers wait while the socket is backed up (a peer not reading): the data they would queue could not go.
        if context.channel.isWritable {
            resumeWriters()
            if buffer.readableBytes >= Self.maxFlushBytes && session.wantsWrite { scheduleFlush() }
        }
        if state.phase == .closed || !session.wantsReadOrWrite {
            context.close(promise: nil)
        }
    }

    /// Closes after writing what is queued: at once when the socket is backed up (a peer that does not read would
    /// keep the connection open for ever) or nothing can be written yet, at the end of a read burst when in one.
    public func closeAfterFlushing() {
        state.close()
        guard let context else { return }
        guard context.channel.isWritable, output.enabled else { return context.close(promise: nil) }
        if output.inReadBurst { return }  // channelReadComplete flushes and closes
        flushOutput()
    }

    public func perform(_ actions: [ConnectionStateMachine.Action]) {
        for action in actions { perform(action) }
    }

    public func perform(_ action: ConnectionStateMachine.Action) {
        willPerform(action)
        switch action {
        case .schedule(let timer, let deadline):
            guard let context else { return }
            timers.schedule(timer, at: deadline, on: context.eventLoop, owner: self)
        case .cancel(let timer):
            timers.cancel(timer)
        case .sendPing(let payload):
            session?.ping(payload)
        case .sendShutdownNotice:
            session?.submitShutdownNotice()
            session?.ping(ConnectionStateMachine.shutdownPingPayload)
        case .sendGoaway(let errorCode, let debugData):
            session?.submitGoaway(errorCode: errorCode, debugData: debugData)
        case .cancelAllStreams:
            cancelAllStreams()
        case .closeAfterFlushing:
            closeAfterFlushing()
        case .closeNow:
            context?.close(promise: nil)
        case .flush:
            scheduleFlush()
        case .releaseIdleMemory:
            session?.releaseIdleMemory()
        }
    }

    /// A timer of the state machine went off (a handler may pass the machine more than the time).
    public func timerFired(_ timer: ConnectionStateMachine.Timer, now: NIODeadline) {
        perform(state.timerFired(timer, now: now))
    }

    /// The start of a read: the state machine sees the bytes (keepalive, header timeout) before the session does.
    public func readStarted(_ bytes: ByteBuffer) {
        output.inReadBurst = true
        if let action = state.received(bytes, now: .now()) { perform(action) }
    }

    /// `channelReadComplete`: the burst's output goes in one flush.
    public func readBurstEnded() {
        output.inReadBurst = false
        flushOutput()
    }

    /// The connection is gone: no timer may fire for it any more.
    public func connectionClosed() {
        state.close()
        timers.close()
    }
}
