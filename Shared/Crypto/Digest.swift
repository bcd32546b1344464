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
        HMACKey(key).authenticationCode(for: data)
    }

    /// An HMAC-SHA-256 key prepared once: each code then costs two hashes, without re-keying (for a key that signs
    /// many messages, such as the internal credential's).
    public struct HMACKey: Sendable {
        private let state: habitflow_hmac_sha256_key

        public init(_ key: some Collection<UInt8>) {
            var state = habitflow_hmac_sha256_key()
            Array(key).withUnsafeBufferPointer { key in
                habitflow_hmac_sha256_key_init(&state, key.baseAddress, key.count)
            }
            self.state = state
        }

        public func authenticationCode(for data: some Collection<UInt8>) -> [UInt8] {
            let code = { (input: UnsafeBufferPointer<UInt8>) -> [UInt8] in
                [UInt8](unsafeUninitializedCapacity: SHA256.byteCount) { output, count in
                    withUnsafePointer(to: state) { state in
                        habitflow_hmac_sha256(state, input.baseAddress, input.count, output.baseAddress)
                    }
                    count = SHA256.byteCount
                }
            }
            return data.withContiguousStorageIfAvailable(code) ?? Array(data).withUnsafeBufferPointer(code)
        }
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
