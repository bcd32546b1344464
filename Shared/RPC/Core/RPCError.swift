public import SwiftProtobuf

/// A call that ended with a status other than OK: the code, a message for developers, and optional rich details.
///
/// Handlers throw it to choose the status a client sees. Any other error a handler throws reaches the client as
/// `UNKNOWN` without its text (it may hold internals). The details travel as `grpc-status-details-bin`, a
/// serialized `google.rpc.Status` whose `details` are these `Any` messages (`BadRequest`, `RetryInfo`, `ErrorInfo`...).
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: RPCStatusCode { didSet { receivedStatusDetails = nil } }
    public var message: String { didSet { receivedStatusDetails = nil } }
    /// Packed `google.rpc.*` detail messages, in order.
    public var details: [Google_Protobuf_Any] { didSet { receivedStatusDetails = nil } }
    /// Trailing metadata to send with the status.
    public var trailers: Metadata
    /// What happened underneath, for logs: never sent (a server passes on the code, message, details and trailers
    /// only).
    ///
    /// - Important: A message may be passed on to the client of a client (a service relays what another answered), so
    ///   it names no address, port, system error or type: those go here. The client sets it on the errors it makes
    ///   itself (a server it could not reach); the server's error mapping logs it.
    public var cause: (any Error)?

    /// The `grpc-status-details-bin` bytes exactly as a server sent them, kept by the client while code, message and
    /// details are unchanged, so an error passed on (a proxy, a handler rethrowing a downstream error) carries them
    /// byte for byte rather than re-encoded.
    package var receivedStatusDetails: [UInt8]?

    public init(
        _ code: RPCStatusCode, _ message: String, details: [Google_Protobuf_Any] = [], trailers: Metadata = [:],
        cause: (any Error)? = nil
    ) {
        precondition(code != .ok, "an RPCError cannot carry OK")
        self.code = code
        self.message = message
        self.details = details
        self.trailers = trailers
        self.cause = cause
    }

    /// Adds one detail message (for example a `Google_Rpc_BadRequest`), packed into `Any`.
    public func addingDetail(_ detail: some Message) -> RPCError {
        var copy = self
        if let packed = try? Google_Protobuf_Any(message: detail) { copy.details.append(packed) }
        return copy
    }

    public var description: String {
        let status = message.isEmpty ? "\(code)" : "\(code): \(message)"
        return cause.map { "\(status) (cause: \($0))" } ?? status
    }

    // The received bytes and the cause are not the status: two errors with the same status are equal.
    public static func == (lhs: RPCError, rhs: RPCError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.details == rhs.details && lhs.trailers == rhs.trailers
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(details)
        hasher.combine(trailers)
    }
}

/// The status a call ended with, as carried in trailers.
public struct RPCStatus: Sendable, Hashable, CustomStringConvertible {
    public var code: RPCStatusCode
    public var message: String
    public var details: [Google_Protobuf_Any]

    public init(code: RPCStatusCode, message: String = "", details: [Google_Protobuf_Any] = []) {
        self.code = code
        self.message = message
        self.details = details
    }

    public static let ok = RPCStatus(code: .ok)

    public var description: String { message.isEmpty ? "\(code)" : "\(code): \(message)" }
}
