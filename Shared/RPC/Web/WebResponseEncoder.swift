public import SwiftProtobuf
public import HabitFlowRPC
public import NIOCore

/// One piece of a web response, for the HTTP/2 or HTTP/1.1 writer to put on the wire.
public enum WebResponsePart {
    /// The response head: HTTP status and header fields (lower-case names).
    case head(status: Int, headers: [(name: String, value: String)])
    case body(ByteBuffer)
    /// The end of the response (no HTTP trailers: web protocols carry the status in the head or the body).
    case end
}

/// How a call ended, as a web response needs it.
public struct WebCallStatus {
    public var code: RPCStatusCode
    public var message: String
    public var details: [Google_Protobuf_Any]
    /// `grpc-status-details-bin` as received from another server.
    public var encodedDetails: [UInt8]?
    /// The call's trailers (the context's and the error's).
    public var trailers: Metadata
    /// The status as gRPC trailer fields (`grpc-status`, `grpc-message`, `grpc-status-details-bin`, then the
    /// trailers), as the server's native path writes them: the content of gRPC-Web's trailer frame.
    public var grpcTrailerFields: [(name: String, value: String)]

    public init(
        code: RPCStatusCode, message: String, details: [Google_Protobuf_Any], encodedDetails: [UInt8]?,
        trailers: Metadata, grpcTrailerFields: [(name: String, value: String)]
    ) {
        self.code = code
        self.message = message
        self.details = details
        self.encodedDetails = encodedDetails
        self.trailers = trailers
        self.grpcTrailerFields = grpcTrailerFields
    }
}

/// Writes the response of one web call, whatever carries it (HTTP/2 stream or HTTP/1.1 exchange): a pure state
/// machine that turns the handler's headers, messages and status into ``WebResponsePart``s.
///
/// - gRPC-Web: the head (200) with the first message or the status, each message length-prefixed, then the status
///   as a trailer frame (flag 0x80) at the end of the body; all of it base64 for `-text`.
/// - Connect unary: nothing until the status. Success: 200, the one message (as JSON for a JSON call), the
///   trailers as `trailer-` headers. Failure: the code's HTTP status and the JSON error body.
public struct WebResponseEncoder {
    public let webProtocol: WebProtocol
    private let transcoder: (any MessageJSONTranscoding)?
    /// Added to the head (CORS).
    private let extraHeaders: [(name: String, value: String)]
    private let allocator: ByteBufferAllocator
    public private(set) var headSent = false
    /// Connect unary: the response message, held until the status.
    private var unaryResponse: ByteBuffer?

    public init(
        protocol webProtocol: WebProtocol, transcoder: (any MessageJSONTranscoding)?,
        extraHeaders: [(name: String, value: String)], allocator: ByteBufferAllocator
    ) {
        self.webProtocol = webProtocol
        self.transcoder = transcoder
        self.extraHeaders = extraHeaders
        self.allocator = allocator
    }

    /// The handler wants its response headers out now (a stream that will be slow): gRPC-Web sends the head;
    /// Connect unary has nothing to send before the status.
    public mutating func initialMetadata(_ metadata: Metadata) -> [WebResponsePart] {
        guard case .grpcWeb = webProtocol, !headSent else { return [] }
        return [head(status: 200, contentType: webProtocol.responseContentType, metadata: metadata)]
    }

    /// One response message (binary protobuf, as handlers write it).
    public mutating func message(_ payload: ByteBuffer, initialMetadata: Metadata) throws(RPCError) -> [WebResponsePart] {
        switch webProtocol {
        case .grpcWeb(let text):
            var parts = self.initialMetadata(initialMetadata)
            let framed = framedMessage(payload, compressed: false, allocator: allocator)
            parts.append(.body(text ? GRPCWebFraming.textEncoded(framed, allocator: allocator) : framed))
            return parts
        case .connectUnary(let json):
            guard unaryResponse == nil else {
                throw RPCError(.internal, "a unary call answered with more than one message")
            }
            if json {
                guard let transcoder else { throw RPCError(.unimplemented, "this method does not answer in JSON") }
                unaryResponse = try transcoder.responseToJSON(payload)
            } else {
                unaryResponse = payload
            }
            return []
        case .connectStreaming:
            throw RPCError(.unimplemented, "Connect streaming is not supported")
        }
    }

    /// The end of the call.
    public mutating func status(_ status: WebCallStatus, initialMetadata: Metadata) -> [WebResponsePart] {
        switch webProtocol {
        case .grpcWeb(let text):
            var parts = self.initialMetadata(initialMetadata)
            let frame = GRPCWebFraming.trailerFrame(status.grpcTrailerFields, allocator: allocator)
            parts.append(.body(text ? GRPCWebFraming.textEncoded(frame, allocator: allocator) : frame))
            parts.append(.end)
            return parts
        case .connectUnary, .connectStreaming:
            let body: ByteBuffer
            let httpStatus: Int
            let contentType: String
            if status.code == .ok {
                httpStatus = 200
                contentType = webProtocol.responseContentType
                // A unary handler that returned without a message: the empty message.
                body = unaryResponse ?? (webProtocol.isJSON ? ByteBuffer(string: "{}") : ByteBuffer())
            } else {
                httpStatus = ConnectProtocol.httpStatus(status.code)
                contentType = "application/json"
                body = ConnectProtocol.errorBody(
                    code: status.code, message: status.message, details: status.details,
                    encodedDetails: status.encodedDetails, allocator: allocator)
            }
            unaryResponse = nil
            var metadata = initialMetadata
            status.trailers.forEachHeaderField { name, value, neverIndexed in
                metadata.add(ConnectProtocol.trailerPrefix + name, value, neverIndexed: neverIndexed)
            }
            var head = self.head(status: httpStatus, contentType: contentType, metadata: metadata)
            if case .head(let status, var headers) = head {
                headers.append(("content-length", String(body.readableBytes)))
                head = .head(status: status, headers: headers)
            }
            return [head, .body(body), .end]
        }
    }

    private mutating func head(status: Int, contentType: String, metadata: Metadata) -> WebResponsePart {
        headSent = true
        var headers: [(name: String, value: String)] = [("content-type", contentType)]
        headers.reserveCapacity(1 + metadata.count + extraHeaders.count)
        metadata.forEachHeaderField { name, value, _ in headers.append((name, value)) }
        headers += extraHeaders
        return .head(status: status, headers: headers)
    }
}
