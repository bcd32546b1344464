internal import HabitFlowBase64
internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import SwiftProtobuf

/// The parts of a response HEADERS block (headers or trailers) gRPC cares about, read in one pass.
struct ClientResponseHead {
    var httpStatus: String?
    var contentType: String?
    var encoding: String?
    var grpcStatus: String?
    var grpcMessage: String?
    var statusDetails: String?
    var metadata = Metadata()

    init(_ fields: [HTTP2HeaderField]) {
        for field in fields {
            switch field.name {
            case ":status": httpStatus = field.value
            case "content-type": contentType = field.value
            case "grpc-encoding": encoding = field.value
            case "grpc-status": grpcStatus = field.value
            case "grpc-message": grpcMessage = field.value
            case "grpc-status-details-bin": statusDetails = field.value
            default:
                guard !field.name.hasPrefix(":"), !field.name.hasPrefix("grpc-") else { continue }
                metadata.addReceived(name: field.name, value: field.value, neverIndexed: field.neverIndexed)
            }
        }
    }

    /// Why these response headers cannot start a gRPC response, if they cannot (HTTP status other than 200, or
    /// not a gRPC content type), as the status the HTTP mapping gives.
    var invalidResponseError: RPCError? {
        guard let httpStatus, let status = Int(httpStatus) else {
            return RPCError(.internal, "response without :status")
        }
        guard status == 200 else {
            return RPCError(RPCStatusCode.forHTTPStatus(status), "unexpected HTTP status \(status)")
        }
        guard let contentType, contentType.hasPrefix("application/grpc") else {
            return RPCError(.unknown, "response content-type \"\(contentType ?? "")\" is not gRPC")
        }
        return nil
    }

    /// The status these trailers (or this Trailers-Only response) carry: `nil` for OK, the error otherwise.
    func status() -> RPCError? {
        guard let grpcStatus else {
            if let error = invalidResponseError { return error }
            return RPCError(.internal, "the response ended without grpc-status")
        }
        guard let number = Int(grpcStatus), let code = RPCStatusCode(rawValue: number) else {
            return RPCError(.unknown, "invalid grpc-status \"\(grpcStatus)\"")
        }
        guard code != .ok else { return nil }
        let message = grpcMessage.map(PercentEncoding.decode) ?? ""
        var details: [Google_Protobuf_Any] = []
        var received: [UInt8]?
        if let statusDetails, let bytes = Base64.decode(statusDetails),
            let status = try? Google_Rpc_Status(serializedBytes: bytes)
        {
            details = status.details
            received = bytes
        }
        var error = RPCError(code, message, details: details, trailers: metadata)
        error.receivedStatusDetails = received
        return error
    }
}
