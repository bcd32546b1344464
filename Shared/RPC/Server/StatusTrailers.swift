internal import HabitFlowBase64
internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import SwiftProtobuf

/// The header fields that end a call: `grpc-status`, `grpc-message` (percent-encoded), `grpc-status-details-bin`
/// (a `google.rpc.Status`, base64 without padding) and the handler's own trailers.
enum StatusTrailers {
    /// `encodedDetails`: `grpc-status-details-bin` as received from another server, passed on unchanged.
    static func fields(
        _ code: RPCStatusCode, message: String, details: [Google_Protobuf_Any], encodedDetails: [UInt8]? = nil,
        trailers: Metadata
    ) -> [HTTP2HeaderField] {
        var fields = [HTTP2HeaderField(name: "grpc-status", value: String(code.rawValue))]
        if !message.isEmpty {
            fields.append(.init(name: "grpc-message", value: PercentEncoding.encode(message)))
        }
        if let encodedDetails {
            fields.append(.init(name: "grpc-status-details-bin", value: Base64.encode(encodedDetails, padding: false)))
        } else if !details.isEmpty {
            var status = Google_Rpc_Status()
            status.code = Int32(code.rawValue)
            status.message = message
            status.details = details
            if let bytes: [UInt8] = try? status.serializedBytes() {
                fields.append(.init(name: "grpc-status-details-bin", value: Base64.encode(bytes, padding: false)))
            }
        }
        trailers.forEachHeaderField { name, value, neverIndexed in
            if !name.hasPrefix("grpc-") { fields.append(.init(name: name, value: value, neverIndexed: neverIndexed)) }
        }
        return fields
    }
}
