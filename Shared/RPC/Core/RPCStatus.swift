/// The canonical gRPC status codes (grpc/grpc `doc/statuscodes.md`).
public enum RPCStatusCode: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case ok = 0
    case cancelled = 1
    case unknown = 2
    case invalidArgument = 3
    case deadlineExceeded = 4
    case notFound = 5
    case alreadyExists = 6
    case permissionDenied = 7
    case resourceExhausted = 8
    case failedPrecondition = 9
    case aborted = 10
    case outOfRange = 11
    case unimplemented = 12
    case `internal` = 13
    case unavailable = 14
    case dataLoss = 15
    case unauthenticated = 16

    /// The upper-snake name used in logs and by other gRPC stacks, for example `DEADLINE_EXCEEDED`.
    public var description: String {
        switch self {
        case .ok: "OK"
        case .cancelled: "CANCELLED"
        case .unknown: "UNKNOWN"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .deadlineExceeded: "DEADLINE_EXCEEDED"
        case .notFound: "NOT_FOUND"
        case .alreadyExists: "ALREADY_EXISTS"
        case .permissionDenied: "PERMISSION_DENIED"
        case .resourceExhausted: "RESOURCE_EXHAUSTED"
        case .failedPrecondition: "FAILED_PRECONDITION"
        case .aborted: "ABORTED"
        case .outOfRange: "OUT_OF_RANGE"
        case .unimplemented: "UNIMPLEMENTED"
        case .internal: "INTERNAL"
        case .unavailable: "UNAVAILABLE"
        case .dataLoss: "DATA_LOSS"
        case .unauthenticated: "UNAUTHENTICATED"
        }
    }

    /// The status a client reports for an HTTP response without `grpc-status`
    /// (grpc/grpc `doc/http-grpc-status-mapping.md`).
    public static func forHTTPStatus(_ status: Int) -> RPCStatusCode {
        switch status {
        case 400, 431: .internal
        case 401: .unauthenticated
        case 403: .permissionDenied
        case 404: .unimplemented
        case 429, 502, 503, 504: .unavailable
        default: .unknown
        }
    }
}

extension RPCStatusCode {
    /// The status a call ends with when a handler (or an interceptor) throws `error`: an ``RPCError``'s code,
    /// `CANCELLED` for cancellation, `UNKNOWN` for anything else. For metrics and logs around a handler.
    public init(endingWith error: any Error) {
        switch error {
        case let error as RPCError: self = error.code
        case is CancellationError: self = .cancelled
        default: self = .unknown
        }
    }
}
