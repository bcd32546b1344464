/// Which browser origins may call a server, and the CORS headers that tell the browser so.
///
/// Off unless configured: a server without a policy sends no CORS headers, so browsers only let pages from its own
/// origin call it. An origin that is not allowed gets no CORS headers either (the browser then blocks the page).
public struct CORSPolicy: Sendable, Hashable {
    /// Exact origins (`https://app.example.com`), compared as sent.
    public var origins: Set<String>
    /// `*`: any origin.
    public var allowsAnyOrigin: Bool

    /// The request headers a web client sends (gRPC-Web's, Connect's and ours).
    public static let allowedHeaders = [
        "content-type", "authorization", "x-grpc-web", "x-user-agent", "grpc-timeout", "connect-protocol-version",
        "connect-timeout-ms", "x-request-id",
    ]
    /// The response headers scripts may read.
    public static let exposedHeaders = ["grpc-status", "grpc-message", "grpc-status-details-bin", "x-request-id"]
    /// How long a browser may cache a preflight answer, in seconds.
    public static let maxAge = "7200"

    public init(origins: some Sequence<String>) {
        var exact = Set<String>()
        var any = false
        for origin in origins {
            if origin == "*" { any = true } else { exact.insert(origin) }
        }
        self.origins = exact
        self.allowsAnyOrigin = any
    }

    /// A comma-separated list (`HABITFLOW_CORS_ORIGINS`); `nil` when it names no origin.
    public init?(parsing list: String) {
        let origins = list.split(separator: ",").map { String($0.trimmingCharacters(in: " \t")) }.filter { !$0.isEmpty }
        guard !origins.isEmpty else { return nil }
        self.init(origins: origins)
    }

    public func allows(origin: String) -> Bool {
        allowsAnyOrigin || origins.contains(origin)
    }

    /// The headers of the answer to a preflight `OPTIONS` request from `origin`: empty when the origin is not allowed
    /// (or the request is not from a browser). The allowed origin is echoed, never `*`, so credentials work too.
    public func preflightHeaders(origin: String?) -> [(name: String, value: String)] {
        guard let origin, allows(origin: origin) else { return [] }
        return [
            ("access-control-allow-origin", origin),
            ("access-control-allow-methods", "POST, OPTIONS"),
            ("access-control-allow-headers", Self.allowedHeaders.joined(separator: ", ")),
            ("access-control-max-age", Self.maxAge),
            ("vary", "Origin"),
        ]
    }

    /// The headers added to a response to `origin`'s request: empty when the origin is not allowed.
    public func responseHeaders(origin: String?) -> [(name: String, value: String)] {
        guard let origin, allows(origin: origin) else { return [] }
        return [
            ("access-control-allow-origin", origin),
            ("access-control-expose-headers", Self.exposedHeaders.joined(separator: ", ")),
            ("vary", "Origin"),
        ]
    }
}

/// What a server does for web clients (``WebProtocol``) besides native gRPC.
public struct WebConfiguration: Sendable, Hashable {
    /// `nil`: no CORS headers (pages of other origins cannot call the server).
    public var cors: CORSPolicy?

    public init(cors: CORSPolicy? = nil) {
        self.cors = cors
    }
}
