/// Per-call settings of a client call: deadline, request metadata, idempotency and compression.
///
/// ```swift
/// var options = CallOptions(timeout: .seconds(2))
/// options.metadata.add("x-user", "42")
/// let habit = try await habits.getHabit(request, options: options)
/// ```
public struct CallOptions: Sendable {
    /// How long the call may take, counted from when it starts; combined with ``deadline`` (the earlier wins).
    public var timeout: Duration?
    /// An absolute deadline, for example the one of an incoming call (see ``propagating(from:)``).
    public var deadline: ContinuousClock.Instant?
    /// Custom request metadata (`-bin` keys carry bytes).
    public var metadata: Metadata
    /// Whether the call may be sent again when an attempt fails with `UNAVAILABLE`. `nil` takes the method's
    /// `idempotency_level` from the proto (generated clients pass it), else `false`.
    ///
    /// Only calls with a single request message (unary, server streaming) are retried, and only before any response
    /// arrived.
    public var idempotent: Bool?
    /// How request messages are compressed (`nil`: not at all). Responses are always accepted in gzip too.
    public var compression: MessageCompression?
    /// The largest response message accepted, after decompression (`nil`: the channel's limit, 4 MiB by default).
    public var maxReceiveMessageSize: Int?

    public init(
        timeout: Duration? = nil, deadline: ContinuousClock.Instant? = nil, metadata: Metadata = [:],
        idempotent: Bool? = nil, compression: MessageCompression? = nil
    ) {
        self.timeout = timeout
        self.deadline = deadline
        self.metadata = metadata
        self.idempotent = idempotent
        self.compression = compression
    }

    /// The deadline the call runs against, for a call starting at `start`: the earlier of ``deadline`` and
    /// `start + timeout`.
    public func effectiveDeadline(startingAt start: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        switch (deadline, timeout) {
        case (nil, nil): nil
        case (let deadline?, nil): deadline
        case (nil, let timeout?): start + timeout
        case (let deadline?, let timeout?): min(deadline, start + timeout)
        }
    }

    /// These options with the deadline of an incoming server call (the earlier deadline wins) and its trace
    /// context continued in a child span (`traceparent`), for the calls a handler makes on behalf of its caller.
    public func propagating(from context: ServerContext) -> CallOptions {
        var options = self
        if let incoming = context.deadline {
            options.deadline = options.deadline.map { min($0, incoming) } ?? incoming
        }
        if options.metadata[TraceContext.headerName] == nil,
            let parent = context.requestMetadata[TraceContext.headerName].flatMap(TraceContext.init(traceparent:))
        {
            options.metadata.setTraceContext(parent.child())
        }
        return options
    }
}

/// Message compression algorithms (`grpc-encoding`).
public enum MessageCompression: String, Sendable, Hashable {
    case gzip
}
