internal import HabitFlowHTTP2
internal import HabitFlowRPC

/// The parts of a request's HEADERS block that gRPC cares about, read in one pass (header order is not relied on).
struct ServerRequestHead {
    var method: String?
    var path: String?
    var contentType: String?
    var te: String?
    var timeout: String?
    var encoding: String?
    var acceptEncoding: String?
    var metadata = Metadata()

    init(_ fields: [HTTP2HeaderField]) {
        metadata.reserveCapacity(fields.count)
        for field in fields {
            // Sorted by the first byte first: a request has a dozen fields, and matching each against every known
            // name was a dozen string comparisons per field.
            switch field.name.utf8.first {
            case UInt8(ascii: ":"):
                switch field.name {
                case ":method": method = field.value
                case ":path": path = field.value
                default: break  // :scheme, :authority; other pseudo-headers are the runtime's too
                }
            case UInt8(ascii: "g") where field.name.hasPrefix("grpc-"):
                switch field.name {
                case "grpc-timeout": timeout = field.value
                case "grpc-encoding": encoding = field.value
                case "grpc-accept-encoding": acceptEncoding = field.value
                default: break  // The reserved grpc-* fields are the runtime's, not the application's.
                }
            case UInt8(ascii: "c") where field.name == "content-type":
                contentType = field.value
            case UInt8(ascii: "t") where field.name == "te":
                te = field.value
            default:
                metadata.addReceived(name: field.name, value: field.value, neverIndexed: field.neverIndexed)
            }
        }
    }

    /// `application/grpc`, `application/grpc+proto` or `application/grpc;…` (but not `application/grpc-web`).
    var hasGRPCContentType: Bool {
        guard let contentType, contentType.hasPrefix("application/grpc") else { return false }
        let rest = contentType.dropFirst("application/grpc".count)
        return rest.isEmpty || rest.first == "+" || rest.first == ";"
    }

    /// Whether the client lists gzip among the encodings it accepts for responses.
    var acceptsGzip: Bool {
        guard let acceptEncoding else { return false }
        // Scanned in place over the UTF-8 bytes, without an array of parts or `Character`s: every call asks.
        let bytes = acceptEncoding.utf8
        let gzip = "gzip".utf8
        var start = bytes.startIndex
        while true {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ",")) ?? bytes.endIndex
            var part = bytes[start..<end]
            while part.first == UInt8(ascii: " ") { part = part.dropFirst() }
            while part.last == UInt8(ascii: " ") { part = part.dropLast() }
            if part.elementsEqual(gzip) { return true }
            guard end < bytes.endIndex else { return false }
            start = bytes.index(after: end)
        }
    }
}

/// Message encodings this server speaks, as advertised in `grpc-accept-encoding`.
enum MessageEncoding: String {
    case identity
    case gzip

    static let advertised = "identity,gzip"
}

