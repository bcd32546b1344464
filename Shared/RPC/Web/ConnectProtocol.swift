internal import HabitFlowBase64
internal import HabitFlowGRPCProtos
public import HabitFlowRPC
public import NIOCore
public import SwiftProtobuf

/// The parts of the Connect protocol (connectrpc.com/docs/protocol) that are not messages: error codes, the HTTP
/// status each maps to, the JSON error body, and the timeout header.
public enum ConnectProtocol {
    /// The only version there is; a request that names another is refused.
    public static let version = "1"

    /// Response trailers travel as headers with this prefix in a unary response.
    public static let trailerPrefix = "trailer-"

    /// The code's name in a Connect error body: gRPC's name in lower snake case, `canceled` with one `l`.
    public static func codeName(_ code: RPCStatusCode) -> String {
        switch code {
        case .ok: "ok"
        case .cancelled: "canceled"
        case .unknown: "unknown"
        case .invalidArgument: "invalid_argument"
        case .deadlineExceeded: "deadline_exceeded"
        case .notFound: "not_found"
        case .alreadyExists: "already_exists"
        case .permissionDenied: "permission_denied"
        case .resourceExhausted: "resource_exhausted"
        case .failedPrecondition: "failed_precondition"
        case .aborted: "aborted"
        case .outOfRange: "out_of_range"
        case .unimplemented: "unimplemented"
        case .internal: "internal"
        case .unavailable: "unavailable"
        case .dataLoss: "data_loss"
        case .unauthenticated: "unauthenticated"
        }
    }

    /// The HTTP status of a unary response that failed with `code` (the protocol's table).
    public static func httpStatus(_ code: RPCStatusCode) -> Int {
        switch code {
        case .ok: 200
        case .cancelled: 499
        case .unknown, .internal, .dataLoss: 500
        case .invalidArgument, .failedPrecondition, .outOfRange: 400
        case .deadlineExceeded: 504
        case .notFound: 404
        case .alreadyExists, .aborted: 409
        case .permissionDenied: 403
        case .resourceExhausted: 429
        case .unimplemented: 501
        case .unavailable: 503
        case .unauthenticated: 401
        }
    }

    /// `connect-timeout-ms`: a positive integer of at most 10 digits; `nil` when malformed.
    public static func parseTimeout(_ value: String) -> Duration? {
        let digits = value.utf8
        guard (1...10).contains(digits.count), digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let milliseconds = Int64(value)
        else { return nil }
        return .milliseconds(milliseconds)
    }

    /// The JSON error body: `{"code": "...", "message": "...", "details": [{"type": "...", "value": "..."}]}`, each
    /// detail's type the full message name (no type URL prefix) and its value the serialized message in base64
    /// without padding. `encodedDetails`: a `google.rpc.Status` as received from another server (its details are
    /// used when `details` is empty).
    ///
    /// Written by swift-protobuf (a `google.protobuf.Struct` as JSON), so strings are escaped by the same code that
    /// writes every other JSON message.
    public static func errorBody(
        code: RPCStatusCode, message: String, details: [Google_Protobuf_Any], encodedDetails: [UInt8]? = nil,
        allocator: ByteBufferAllocator
    ) -> ByteBuffer {
        var details = details
        if details.isEmpty, let encodedDetails,
            let status = try? Google_Rpc_Status(serializedBytes: encodedDetails)
        {
            details = status.details
        }
        var body = Google_Protobuf_Struct()
        body.fields["code"] = Google_Protobuf_Value(stringValue: codeName(code))
        if !message.isEmpty { body.fields["message"] = Google_Protobuf_Value(stringValue: message) }
        if !details.isEmpty {
            body.fields["details"] = Google_Protobuf_Value(
                listValue: Google_Protobuf_ListValue(
                    values: details.map { detail in
                        var entry = Google_Protobuf_Struct()
                        let typeName = detail.typeURL.split(separator: "/").last.map(String.init) ?? detail.typeURL
                        entry.fields["type"] = Google_Protobuf_Value(stringValue: typeName)
                        entry.fields["value"] = Google_Protobuf_Value(
                            stringValue: Base64.encode(detail.value, padding: false))
                        return Google_Protobuf_Value(structValue: entry)
                    }))
        }
        // A Struct of strings always serializes; the fallback only keeps the signature non-throwing.
        let json = (try? body.jsonString()) ?? #"{"code":"internal"}"#
        var buffer = allocator.buffer(capacity: json.utf8.count)
        buffer.writeString(json)
        return buffer
    }
}
