public import NIOCore

/// Fired up the pipeline by ``TLSHandler`` when the handshake completes, before any application data.
///
/// An HTTP/2 layer checks ``negotiatedProtocol`` is `"h2"` here before it sends its preface.
public struct TLSHandshakeCompleted: Sendable, Hashable {
    /// The ALPN protocol both sides agreed on, or `nil` when the client offered none (or the server ignored ALPN).
    public var negotiatedProtocol: String?
    /// The protocol version in use: `TLSv1.3` or `TLSv1.2`.
    public var protocolVersion: String

    public init(negotiatedProtocol: String?, protocolVersion: String) {
        self.negotiatedProtocol = negotiatedProtocol
        self.protocolVersion = protocolVersion
    }
}

/// TLS for one connection: ciphertext below, plaintext `ByteBuffer`s above, in both directions.
///
/// Add it first in the pipeline (nearest the socket). The handshake starts when the channel becomes active (a client
/// sends its ClientHello) and is driven by reads; writes made before it completes are held and sent after it.
/// Writes are encrypted on `flush`, all of them, then passed on with one flush. Closing sends `close_notify` first.
///
/// Failures (a refused certificate, a protocol error, a peer that vanished without `close_notify`) reach the next
/// handler as a ``TLSError`` in `errorCaught`, and the channel is closed. A handshake timeout is the owner's
/// business: close the channel if ``TLSHandshakeCompleted`` did not arrive in time.
///
/// With `ChannelOptions.allowRemoteHalfClosure`, a peer's `close_notify` is passed up as
/// `ChannelEvent.inputClosed` and we may go on writing; without it we answer with our `close_notify` and close.
public final class TLSHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private enum State {
        case idle
        case handshaking
        case established
        case closed
    }

    private struct PendingWrite {
        var data: ByteBuffer
        var promise: EventLoopPromise<Void>?
    }

    /// Plaintext is encrypted in slices of this size so the ciphertext of a large write goes out in pieces.
    private static let plaintextSliceSize = 256 * 1024
    /// Decrypted data is passed up in buffers of about this size.
    private static let plaintextReadBatchSize = 64 * 1024

    private let connection: TLSConnection
    private var state = State.idle
    private var pendingWrites: [PendingWrite] = []
    /// How many of `pendingWrites` a flush asked for while the handshake was still running.
    private var flushedWriteCount = 0
    private var sentCloseNotify = false
    private var receivedCloseNotify = false
    private var allowsRemoteHalfClosure = false

    /// A handler for one connection of `context`.
    ///
    /// - Parameter serverName: For clients, the host expected in the server's certificate (and sent as SNI when it
    ///   is a DNS name); overrides ``TLSConfiguration/Client/serverName``. Ignored by servers.
    public init(context: TLSContext, serverName: String? = nil) throws(TLSError) {
        self.connection = try TLSConnection(context: context, serverName: serverName, allocator: ByteBufferAllocator())
    }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        allowsRemoteHalfClosure =
            (try? context.channel.syncOptions?.getOption(ChannelOptions.allowRemoteHalfClosure)) ?? false
        if context.channel.isActive { startHandshake(context: context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        state = .closed
        failPendingWrites(ChannelError.ioOnClosedChannel)
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        startHandshake(context: context)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .idle, .closed:
            break
        case .handshaking:
            state = .closed
            failPendingWrites(ChannelError.ioOnClosedChannel)
            context.fireErrorCaught(
                TLSError(code: .handshakeFailed, message: "the connection closed during the TLS handshake"))
        case .established:
            state = .closed
            failPendingWrites(ChannelError.ioOnClosedChannel)
            if !receivedCloseNotify && !sentCloseNotify {
                context.fireErrorCaught(
                    TLSError(code: .uncleanShutdown, message: "the peer closed the connection without close_notify"))
            }
        }
        context.fireChannelInactive()
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard state == .idle else { return }
        state = .handshaking
        advanceHandshake(context: context)
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state != .closed, !receivedCloseNotify else { return }  // nothing is read after close_notify
        connection.receive(unwrapInboundIn(data))
        processInput(context: context)
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let channelEvent = event as? ChannelEvent, channelEvent == .inputClosed else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        // The peer's TCP FIN. After its close_notify that is expected (and already passed up); before it, the stream
        // was cut short.
        guard state != .closed, !receivedCloseNotify else { return }
        connection.markInputClosed()
        processInput(context: context)  // OpenSSL sees the end of file: a close_notify still buffered, or an error
        if state != .closed && !receivedCloseNotify {
            fail(
                context: context,
                TLSError(code: .uncleanShutdown, message: "the peer closed its side without close_notify"))
        }
    }

    private func processInput(context: ChannelHandlerContext) {
        switch state {
        case .idle:
            startHandshake(context: context)
        case .handshaking:
            advanceHandshake(context: context)
        case .established:
            readApplicationData(context: context)
        case .closed:
            break
        }
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        switch connection.handshake() {
        case .wantsInput:
            flushOutput(context: context)
        case .failed(let error):
            fail(context: context, error)
        case .complete:
            state = .established
            flushOutput(context: context)
            context.fireUserInboundEventTriggered(
                TLSHandshakeCompleted(
                    negotiatedProtocol: connection.negotiatedProtocol,
                    protocolVersion: connection.protocolVersion))
            // Writes flushed during the handshake go out now; later ones wait for their own flush.
            if state == .established && flushedWriteCount > 0 {
                encryptAndFlush(context: context, writeCount: flushedWriteCount)
            }
            // Application data may have arrived with the last handshake message.
            if state == .established { readApplicationData(context: context) }
        }
    }

    private func readApplicationData(context: ChannelHandlerContext) {
        var plaintext = context.channel.allocator.buffer(capacity: 0)
        var outcome = TLSConnection.ReadResult.bytes
        while state == .established, !receivedCloseNotify, case .bytes = outcome {
            outcome = connection.read(into: &plaintext)
            if plaintext.readableBytes >= Self.plaintextReadBatchSize {
                context.fireChannelRead(wrapInboundOut(plaintext))
                plaintext = context.channel.allocator.buffer(capacity: 0)
            }
        }
        // Data decrypted before a close_notify or an error is authentic: deliver it first.
        if plaintext.readableBytes > 0 && state == .established {
            context.fireChannelRead(wrapInboundOut(plaintext))
        }
        switch outcome {
        case .bytes, .wantsInput:
            if state != .closed { flushOutput(context: context) }  // session tickets, key update replies
        case .closeNotifyReceived:
            peerSentCloseNotify(context: context)
        case .failed(let error):
            fail(context: context, error)
        }
    }

    private func peerSentCloseNotify(context: ChannelHandlerContext) {
        guard state == .established else { return }
        receivedCloseNotify = true
        if allowsRemoteHalfClosure && !sentCloseNotify {
            flushOutput(context: context)
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        } else {
            sendCloseNotify(context: context)
            state = .closed
            failPendingWrites(ChannelError.ioOnClosedChannel)
            context.close(promise: nil)
        }
    }

    // MARK: Outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard state != .closed else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        guard !sentCloseNotify else {
            promise?.fail(ChannelError.outputClosed)
            return
        }
        pendingWrites.append(PendingWrite(data: unwrapOutboundIn(data), promise: promise))
    }

    public func flush(context: ChannelHandlerContext) {
        switch state {
        case .idle, .handshaking:
            flushedWriteCount = pendingWrites.count
        case .established:
            encryptAndFlush(context: context, writeCount: pendingWrites.count)
        case .closed:
            break
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch mode {
        case .input:
            context.close(mode: mode, promise: promise)
        case .output, .all:
            // Like any NIO channel, writes not flushed yet are dropped; flushed ones are already encrypted (or, in
            // the handshake, never will be).
            failPendingWrites(ChannelError.ioOnClosedChannel)
            if state == .established { sendCloseNotify(context: context) }
            if mode == .all || state != .established { state = .closed }
            context.close(mode: mode, promise: promise)
        }
    }

    /// Encrypts the first `writeCount` pending writes and passes the ciphertext on with one flush.
    private func encryptAndFlush(context: ChannelHandlerContext, writeCount: Int) {
        let writes = pendingWrites.prefix(writeCount)
        pendingWrites.removeFirst(writeCount)
        flushedWriteCount = 0

        var promises: [EventLoopPromise<Void>] = []
        for (index, write) in zip(writes.indices, writes) {
            var plaintext = write.data
            while let slice = plaintext.readSlice(length: min(plaintext.readableBytes, Self.plaintextSliceSize)),
                slice.readableBytes > 0
            {
                do {
                    try connection.write(slice)
                } catch {
                    let unsent = writes[index...].compactMap(\.promise)
                    for promise in promises + unsent { promise.fail(error) }
                    fail(context: context, error)
                    return
                }
                if connection.pendingOutputBytes >= Self.plaintextSliceSize, let ciphertext = connection.takeOutput() {
                    context.write(wrapOutboundOut(ciphertext), promise: nil)
                }
            }
            if let promise = write.promise { promises.append(promise) }
        }

        // NIO completes writes in order, so the last ciphertext write's promise stands for every plaintext write.
        let ciphertext = connection.takeOutput()
        if let ciphertext {
            let promise: EventLoopPromise<Void>?
            switch promises.count {
            case 0: promise = nil
            case 1: promise = promises[0]
            default:
                promise = context.eventLoop.makePromise(of: Void.self)
                for each in promises { promise!.futureResult.cascade(to: each) }
            }
            context.write(wrapOutboundOut(ciphertext), promise: promise)
        } else {
            for promise in promises { promise.succeed() }  // only empty writes
        }
        context.flush()
    }

    // MARK: Helpers

    private func sendCloseNotify(context: ChannelHandlerContext) {
        guard !sentCloseNotify, connection.isHandshakeComplete else { return }
        sentCloseNotify = true
        connection.shutdown()
        flushOutput(context: context)
    }

    /// Writes and flushes whatever OpenSSL produced on its own: handshake messages, tickets, alerts.
    private func flushOutput(context: ChannelHandlerContext) {
        if let ciphertext = connection.takeOutput() {
            context.writeAndFlush(wrapOutboundOut(ciphertext), promise: nil)
        }
    }

    private func failPendingWrites(_ error: any Error) {
        let writes = pendingWrites
        pendingWrites.removeAll()
        flushedWriteCount = 0
        for write in writes { write.promise?.fail(error) }
    }

    /// Sends any alert OpenSSL queued, reports `error` up the pipeline and closes the channel.
    private func fail(context: ChannelHandlerContext, _ error: TLSError) {
        guard state != .closed else { return }
        state = .closed
        flushOutput(context: context)
        failPendingWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
