internal import HabitFlowBase64
internal import HabitFlowCompression
internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore
internal import SwiftProtobuf

/// The connection itself: batched output, idle and age timers, keepalive pings, and graceful shutdown (GOAWAY).
extension ServerConnectionHandler {
    // MARK: Output

    func scheduleFlush() {
        guard !inReadBurst, !flushScheduled, let context else { return }
        flushScheduled = true
        let bound = loopBound
        context.eventLoop.execute {
            let handler = bound.value
            handler.flushScheduled = false
            handler.flushOutput()
        }
    }

    /// What one flush takes from the session at most: a client that stops reading leaves at most this much (plus
    /// the channel's write buffer watermark) queued in the channel, not everything its flow-control windows allow.
    static let maxFlushBytes = 1 << 20

    /// Writes what the session has to send in one buffer and one flush, up to ``maxFlushBytes``; the rest goes in
    /// the next flush, at once while the channel stays writable, otherwise when it becomes writable again.
    func flushOutput() {
        guard outputEnabled, let session, let context, context.channel.isWritable else { return }
        var buffer = outputBuffer.take()
        for _ in 0..<8 {
            do {
                let events = try session.drainOutput(into: &buffer, limit: Self.maxFlushBytes)
                guard !events.isEmpty else { break }
                handle(events)
            } catch {
                logger.info("HTTP/2 session failed while sending; closing", metadata: ["error": "\(error)"])
                phase = .closed
                break
            }
            if !session.wantsWrite { break }
        }
        outputBuffer.keep(buffer)
        if buffer.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
        // Writers wait while the socket is backed up (a client not reading): the data they would queue could not go.
        if context.channel.isWritable {
            resumeResponseWriters()
            if buffer.readableBytes >= Self.maxFlushBytes && session.wantsWrite { scheduleFlush() }
        }
        if case .closed = phase {
            context.close(promise: nil)
        } else if !session.wantsReadOrWrite {
            context.close(promise: nil)
        }
    }

    /// Resumes the writers whose stream's queue drained below half its high watermark, while the connection's queue
    /// is below half its own too; a writer whose stream's queue is empty resumes regardless of the connection's.
    func resumeResponseWriters() {
        guard let session else { return }
        let lowWatermark = configuration.responseQueueHighWatermark / 2
        let connectionBelowLowWatermark =
            session.totalQueuedOutboundBytes <= configuration.connectionResponseQueueHighWatermark / 2
        for (streamID, stream) in streams {
            guard let waiter = stream.responseWaiter else { continue }
            let queued = session.queuedOutboundBytes(streamID: streamID)
            guard queued == 0 || (queued <= lowWatermark && connectionBelowLowWatermark) else { continue }
            stream.responseWaiter = nil
            waiter.resume()
        }
    }

    func closeAfterFlushing() {
        phase = .closed
        // A client that does not read would keep an unwritable connection open for ever: close without flushing.
        if let context, !context.channel.isWritable {
            context.close(promise: nil)
            return
        }
        if inReadBurst { return }  // channelReadComplete flushes and closes
        flushOutput()
        if outputEnabled == false { context?.close(promise: nil) }
    }

    // MARK: Connection management

    func streamsChanged() {
        if streams.isEmpty {
            if case .draining = phase {
                phase = .closed
                scheduleFlush()
                if inReadBurst == false, flushScheduled == false { context?.close(promise: nil) }
                return
            }
            idleSince = .now()
        }
    }

    /// One timer per connection, re-armed only when it fires: calls starting and ending at high rates then cost no
    /// timer work, only a timestamp.
    func armIdleTimer(after delay: TimeAmount? = nil) {
        guard let idleTimeout = configuration.connectionManagement.idleTimeout, let context else { return }
        let bound = loopBound
        idleTimer = context.eventLoop.scheduleTask(in: delay ?? TimeAmount(idleTimeout)) {
            bound.value.idleTimerFired()
        }
    }

    func idleTimerFired() {
        guard let idleTimeout = configuration.connectionManagement.idleTimeout else { return }
        let idleFor = NIODeadline.now() - idleSince
        if streams.isEmpty && idleFor >= TimeAmount(idleTimeout) {
            logger.debug("connection idle; closing")
            beginGracefulShutdown()
        } else {
            armIdleTimer(after: streams.isEmpty ? TimeAmount(idleTimeout) - idleFor : TimeAmount(idleTimeout))
        }
    }

    /// One timer while the client is inside its preface or a header block (``InboundHeaderProgress``), due when
    /// that began plus the header timeout, and re-armed only when it fires early: headers that arrive promptly cost
    /// no timer work beyond the one that checks the preface.
    func armHeaderTimer() {
        guard let timeout = configuration.connectionManagement.headerTimeout,
            let since = headerProgress.incompleteSince, let context
        else { return }
        let bound = loopBound
        headerTimer = context.eventLoop.scheduleTask(deadline: since + TimeAmount(timeout)) {
            bound.value.headerTimerFired()
        }
    }

    func headerTimerFired() {
        headerTimer = nil
        guard let timeout = configuration.connectionManagement.headerTimeout,
            let since = headerProgress.incompleteSince
        else { return }
        guard NIODeadline.now() - since >= TimeAmount(timeout) else { return armHeaderTimer() }
        logger.info("client too slow with its preface or a header block; GOAWAY ENHANCE_YOUR_CALM")
        session?.submitGoaway(errorCode: .enhanceYourCalm, debugData: "header_timeout")
        closeAfterFlushing()
    }

    func armKeepalivePing() {
        guard let interval = configuration.keepalive.pingInterval, let context else { return }
        let bound = loopBound
        pingTimer = context.eventLoop.scheduleTask(in: TimeAmount(interval)) {
            let handler = bound.value
            if NIODeadline.now() - handler.lastReadTime >= TimeAmount(interval) {
                handler.sendKeepalivePing()
            }
            handler.armKeepalivePing()
        }
    }

    func sendKeepalivePing() {
        guard let context, pingTimeoutTimer == nil else { return }
        session?.ping(Self.keepalivePingPayload)
        let bound = loopBound
        pingTimeoutTimer = context.eventLoop.scheduleTask(in: TimeAmount(configuration.keepalive.pingTimeout)) {
            let handler = bound.value
            handler.logger.info("keepalive ping not answered; closing")
            handler.context?.close(promise: nil)
        }
        scheduleFlush()
    }

    func pingAcknowledged() {
        pingTimeoutTimer?.cancel()
        pingTimeoutTimer = nil
        if case .shutdownNoticeSent(let timer) = phase {
            timer?.cancel()
            sendFinalGoaway()
        }
    }

    /// Graceful shutdown: GOAWAY(2^31-1) at once, the real GOAWAY one round trip later, close when calls finish
    /// or the grace period ends.
    func beginGracefulShutdown() {
        guard case .active = phase, let session, let context else { return }
        session.submitShutdownNotice()
        session.ping(Self.shutdownPingPayload)
        let bound = loopBound
        let fallback = context.eventLoop.scheduleTask(in: .seconds(1)) { bound.value.sendFinalGoaway() }
        phase = .shutdownNoticeSent(fallback)
        scheduleFlush()
    }

    func sendFinalGoaway() {
        guard case .shutdownNoticeSent = phase, let session, let context else { return }
        session.submitGoaway(errorCode: .noError)
        let bound = loopBound
        let grace = context.eventLoop.scheduleTask(in: TimeAmount(configuration.connectionManagement.gracePeriod)) {
            let handler = bound.value
            handler.logger.info("grace period over; cancelling the remaining calls", metadata: ["calls": "\(handler.streams.count)"])
            for (streamID, stream) in handler.streams {
                handler.session?.resetStream(streamID, errorCode: .cancel)
                stream.abandon(error: CancellationError())
            }
            handler.streams.removeAll()
            handler.closeAfterFlushing()
        }
        phase = .draining(grace)
        if streams.isEmpty { phase = .closed }
        scheduleFlush()
    }
}
