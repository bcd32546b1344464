public import SwiftProtobuf

/// A call that ended with a status other than OK: the code, a message for developers, and optional rich details.
///
/// Handlers throw it to choose the status a client sees. Any other error a handler throws reaches the client as
/// `UNKNOWN` without its text (it may hold internals). The details travel as `grpc-status-details-bin`, a
/// serialized `google.rpc.Status` whose `details` are these `Any` messages (`BadRequest`, `RetryInfo`, `ErrorInfo`...).
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: RPCStatusCode
    public var message: String
    /// Packed `google.rpc.*` detail messages, in order.
    public var details: [Google_Protobuf_Any]
    /// Trailing metadata to send with the status.
    public var trailers: Metadata

    public init(
        _ code: RPCStatusCode, _ message: String, details: [Google_Protobuf_Any] = [], trailers: Metadata = [:]
    ) {
        precondition(code != .ok, "an RPCError cannot carry OK")
        self.code = code
        self.message = message
        self.details = details
        self.trailers = trailers
    }

    /// Adds one detail message (for example a `Google_Rpc_BadRequest`), packed into `Any`.
    public func addingDetail(_ detail: some Message) -> RPCError {
        var copy = self
        if let packed = try? Google_Protobuf_Any(message: detail) { copy.details.append(packed) }
        return copy
    }

    public var description: String {
        message.isEmpty ? "\(code)" : "\(code): \(message)"
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
