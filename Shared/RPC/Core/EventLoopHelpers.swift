public import NIOCore

// A convenience the client and server transports share (package access: not part of the public API).

extension EventLoop {
    /// Runs `work` at once when already on this loop (no hop), else enqueues it.
    package func executeOrRunNow(_ work: @escaping @Sendable () -> Void) {
        if inEventLoop { work() } else { execute(work) }
    }
}
