public import NIOEmbedded
public import Testing

/// Sets up a connection on an `EmbeddedChannel` with `open`, closes it, shuts its loop down, and expects that nothing
/// keeps the channel or its loop alive afterwards: a connection handler that outlives its connection holds both.
public func expectFreedAfterClose(
    sourceLocation: SourceLocation = #_sourceLocation, _ open: (EmbeddedChannel, EmbeddedEventLoop) throws -> Void
) throws {
    weak var closedChannel: EmbeddedChannel?
    weak var closedLoop: EmbeddedEventLoop?
    try {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try open(channel, loop)
        _ = try channel.close().wait()
        loop.run()
        try loop.syncShutdownGracefully()
        closedChannel = channel
        closedLoop = loop
    }()
    #expect(closedChannel == nil, "the closed connection's channel is still alive", sourceLocation: sourceLocation)
    #expect(
        closedLoop == nil, "the closed connection's handler still holds its event loop", sourceLocation: sourceLocation)
}
