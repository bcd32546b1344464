internal import HabitFlowBase64
internal import HabitFlowCompression
internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowTLS
internal import Logging
internal import NIOCore
internal import SwiftProtobuf

/// The connection itself: its output and lifecycle come from ``HTTP2ConnectionShell`` and ``ConnectionStateMachine``;
/// here is what they mean for a server.
extension ServerConnectionHandler: HTTP2ConnectionShell {
    /// Resumes the writers whose stream's queue drained below half its high watermark, while the connection's queue
    /// is below half its own too; a writer whose stream's queue is empty resumes regardless of the connection's.
    func resumeWriters() {
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

    func streamOpened() {
        state.streamOpened()
    }

    func streamClosed() {
        if let action = state.streamClosed(now: .now()) { perform(action) }
    }

    func beginGracefulShutdown() {
        perform(state.beginGracefulShutdown(now: .now()))
    }

    func sessionFailedWhileSending(_ error: any Error) {
        logger.info("HTTP/2 session failed while sending; closing", metadata: ["error": "\(error)"])
    }

    func cancelAllStreams() {
        for (streamID, stream) in streams {
            session?.resetStream(streamID, errorCode: .cancel)
            stream.abandon(error: CancellationError())
        }
        streams.removeAll()
    }

    func willPerform(_ action: ConnectionStateMachine.Action) {
        switch action {
        case .sendShutdownNotice:
            logger.debug("shutting down gracefully", metadata: ["calls": "\(streams.count)"])
        case .sendGoaway(let errorCode, "header_timeout"):
            logger.info("client too slow with its preface or a header block; GOAWAY \(errorCode)")
        case .sendGoaway(let errorCode, "too_many_pings"):
            logger.info("client pings too often; GOAWAY \(errorCode)")
        case .cancelAllStreams:
            logger.info("grace period over; cancelling the remaining calls", metadata: ["calls": "\(streams.count)"])
        case .closeNow:
            logger.info("keepalive ping not answered; closing")
        default:
            break
        }
    }
}

extension RPCServerConfiguration {
    /// What each connection's ``ConnectionStateMachine`` enforces.
    var connectionLifecycle: ConnectionStateMachine.Configuration {
        ConnectionStateMachine.Configuration(
            headerTimeout: connectionManagement.headerTimeout.map { TimeAmount($0) },
            idleTimeout: connectionManagement.idleTimeout.map { TimeAmount($0) },
            maxAge: connectionManagement.maxConnectionAge.map { TimeAmount($0) },
            gracePeriod: TimeAmount(connectionManagement.gracePeriod),
            keepalive: keepalive.pingInterval.map {
                .init(interval: TimeAmount($0), timeout: TimeAmount(keepalive.pingTimeout), withoutCalls: true)
            },
            pingPolicy: .init(
                minIntervalWithCalls: TimeAmount(keepalive.minPingIntervalWithCalls),
                permitWithoutCalls: keepalive.permitPingsWithoutCalls, maxStrikes: keepalive.maxPingStrikes),
            memoryReleaseDelay: connectionManagement.idleMemoryReleaseDelay.map { TimeAmount($0) })
    }
}
