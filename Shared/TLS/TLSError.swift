internal import COpenSSL

/// A TLS failure: a bad configuration, a failed handshake, or a broken connection, with OpenSSL's own reasons.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is; new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case invalidConfiguration
            case handshakeFailed
            case certificateVerificationFailed
            case noApplicationProtocol
            case protocolFailure
            case uncleanShutdown
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        public var description: String { value.rawValue }

        /// A certificate, key or trust store could not be loaded, or the settings contradict each other.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The handshake failed for a reason not covered by a more specific code (bad ClientHello, no shared cipher).
        public static let handshakeFailed = Code(.handshakeFailed)
        /// The peer's certificate was refused: unknown issuer, expired, or not valid for the expected host name.
        public static let certificateVerificationFailed = Code(.certificateVerificationFailed)
        /// The two sides share no ALPN protocol (the server sent, or received, a `no_application_protocol` alert).
        public static let noApplicationProtocol = Code(.noApplicationProtocol)
        /// After the handshake: a corrupt record, a fatal alert from the peer, or a failed encryption.
        public static let protocolFailure = Code(.protocolFailure)
        /// The peer closed the TCP connection without sending `close_notify` first.
        public static let uncleanShutdown = Code(.uncleanShutdown)
    }

    public var code: Code
    /// What was being done, in words.
    public var message: String
    /// OpenSSL's error queue at the time of the failure, oldest first, plus the certificate verification result
    /// where that was the reason.
    public var reasons: [String]
    /// The underlying error, if another layer failed first.
    public var cause: (any Error)?

    public init(code: Code, message: String, reasons: [String] = [], cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.reasons = reasons
        self.cause = cause
    }

    public var description: String {
        var text = "\(code): \(message)"
        if !reasons.isEmpty { text += " (\(reasons.joined(separator: "; ")))" }
        if let cause { text += ", caused by: \(cause)" }
        return text
    }

    /// Captures (and clears) OpenSSL's error queue for a failure described by `message`.
    static func openSSL(_ code: Code, _ message: String) -> TLSError {
        TLSError(code: code, message: message, reasons: drainOpenSSLErrors().map(\.text))
    }
}

/// One entry of OpenSSL's per-thread error queue.
struct OpenSSLErrorEntry {
    var packed: UInt
    var text: String

    /// The `SSL_R_…` reason number (for alerts received: `SSL_AD_REASON_OFFSET` plus the alert number).
    var reason: Int32 { ERR_GET_REASON(packed) }
}

/// Empties OpenSSL's error queue of this thread and returns what was in it, oldest first.
func drainOpenSSLErrors() -> [OpenSSLErrorEntry] {
    var entries: [OpenSSLErrorEntry] = []
    while case let packed = ERR_get_error(), packed != 0 {
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(packed, &text, text.count)
        let bytes = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        entries.append(OpenSSLErrorEntry(packed: packed, text: String(decoding: bytes, as: UTF8.self)))
    }
    return entries
}

/// Turns OpenSSL's "1 is success" return convention into a thrown ``TLSError``.
@inline(__always)
func requireOne(_ result: Int32, _ message: @autoclosure () -> String) throws(TLSError) {
    if result != 1 { throw TLSError.openSSL(.invalidConfiguration, message()) }
}
