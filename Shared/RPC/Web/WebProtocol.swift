/// The browser-friendly protocols a server can speak next to native gRPC, told apart by the request's content type.
///
/// gRPC-Web is grpc/grpc `doc/PROTOCOL-WEB.md`; Connect is connectrpc.com/docs/protocol (unary calls only here).
public enum WebProtocol: Sendable, Hashable {
    /// gRPC-Web: gRPC's length-prefixed messages, the status in a trailer frame at the end of the body. `text`:
    /// the body is base64 (`application/grpc-web-text`), for clients that cannot read binary streams.
    case grpcWeb(text: Bool)
    /// Connect unary: the bare message as the body (`application/proto`, or `application/json` when `json`), the
    /// status as the HTTP status, errors as a JSON body.
    case connectUnary(json: Bool)
    /// Connect streaming (`application/connect+…`): recognised so such a client gets a Connect error, not served.
    case connectStreaming

    /// The protocol of a request with this content type; `nil` for native gRPC and anything else.
    public init?(contentType: String) {
        // The exact types clients send, matched without allocating (this runs for every web call).
        if let known = Self.exact[contentType] {
            self = known
            return
        }
        // Parameters (`; charset=utf-8`) do not change the protocol; the media type is case-insensitive.
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: " \t").lowercased()
        }
        switch mediaType {
        case "application/grpc-web", "application/grpc-web+proto": self = .grpcWeb(text: false)
        case "application/grpc-web-text", "application/grpc-web-text+proto": self = .grpcWeb(text: true)
        case "application/proto": self = .connectUnary(json: false)
        case "application/json": self = .connectUnary(json: true)
        case let type? where type.hasPrefix("application/connect+"): self = .connectStreaming
        default: return nil
        }
    }

    private static let exact: [String: WebProtocol] = [
        "application/grpc-web": .grpcWeb(text: false), "application/grpc-web+proto": .grpcWeb(text: false),
        "application/grpc-web-text": .grpcWeb(text: true), "application/grpc-web-text+proto": .grpcWeb(text: true),
        "application/proto": .connectUnary(json: false), "application/json": .connectUnary(json: true),
    ]

    /// Whether errors are answered the Connect way (HTTP status and a JSON body) rather than in gRPC trailers.
    public var isConnect: Bool {
        switch self {
        case .grpcWeb: false
        case .connectUnary, .connectStreaming: true
        }
    }

    /// Whether request and response messages are JSON (and need the method's transcoder).
    public var isJSON: Bool { self == .connectUnary(json: true) }

    /// The content type of a successful response.
    public var responseContentType: String {
        switch self {
        case .grpcWeb(text: false): "application/grpc-web+proto"
        case .grpcWeb(text: true): "application/grpc-web-text+proto"
        case .connectUnary(json: false): "application/proto"
        case .connectUnary(json: true), .connectStreaming: "application/json"
        }
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> Substring {
        var result = Substring(self)
        while let first = result.first, set.contains(first) { result.removeFirst() }
        while let last = result.last, set.contains(last) { result.removeLast() }
        return result
    }
}
