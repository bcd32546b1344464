internal import COpenSSL

/// A failure inside OpenSSL or libcrypt, with the library's own reason where it gave one.
public struct CryptoError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var reason: String

    public var description: String { "\(operation) failed: \(reason)" }

    /// Captures (and clears) OpenSSL's error queue for `operation`.
    static func openSSL(_ operation: String) -> CryptoError {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            reasons.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return CryptoError(operation: operation, reason: reasons.isEmpty ? "unknown OpenSSL error" : reasons.joined(separator: "; "))
    }
}

/// Turns OpenSSL's "1 is success" return convention into a thrown ``CryptoError``.
@inline(__always)
func requireOne(_ result: Int32, _ operation: @autoclosure () -> String) throws(CryptoError) {
    if result != 1 { throw CryptoError.openSSL(operation()) }
}
