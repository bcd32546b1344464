internal import COpenSSL

/// SHA-256 digests and HMAC-SHA-256 message authentication.
public enum SHA256 {
    public static let byteCount = 32

    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        Array(data).withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                _ = COpenSSL.SHA256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return digest
    }

    /// HMAC-SHA-256 of `data` under `key`.
    public static func hmac(key: some Collection<UInt8>, data: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let key = Array(key)
        Array(data).withUnsafeBufferPointer { input in
            key.withUnsafeBufferPointer { key in
                _ = HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), input.baseAddress, input.count, &digest, &length)
            }
        }
        return Array(digest.prefix(Int(length)))
    }
}

/// Comparisons whose running time does not depend on where the inputs differ (for secrets and MACs).
public enum ConstantTime {
    /// True when both have the same length and the same bytes; the length itself is not secret.
    public static func equals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        let lhs = Array(lhs)
        let rhs = Array(rhs)
        guard lhs.count == rhs.count else { return false }
        guard !lhs.isEmpty else { return true }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0 }
        }
    }
}
