internal import COpenSSL

/// Ed25519 signing keys (RFC 8032) through OpenSSL's EVP interface.
///
/// Keys are held as their raw 32-byte encodings, which keeps them plain `Sendable` values; the OpenSSL key object
/// is built for each operation (a few microseconds, small next to the signature itself).
public enum Ed25519 {
    public static let keyByteCount = 32
    public static let signatureByteCount = 64

    public struct PrivateKey: Sendable {
        /// The 32-byte seed. Treat as a secret: never log it.
        public let rawRepresentation: [UInt8]
        public let publicKey: PublicKey

        /// A new random key.
        public init() throws(CryptoError) {
            try self.init(rawRepresentation: SecureRandom.bytes(Ed25519.keyByteCount))
        }

        public init(rawRepresentation: [UInt8]) throws(CryptoError) {
            guard rawRepresentation.count == Ed25519.keyByteCount else {
                throw CryptoError(operation: "Ed25519 private key", reason: "expected 32 bytes, got \(rawRepresentation.count)")
            }
            let key = try PKey.ed25519(privateKey: rawRepresentation)
            self.rawRepresentation = rawRepresentation
            self.publicKey = try PublicKey(rawRepresentation: key.rawPublicKey())
        }

        /// The 64-byte signature of `message`.
        public func signature(for message: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
            try PKey.ed25519(privateKey: rawRepresentation).sign(Array(message), digest: nil)
        }
    }

    public struct PublicKey: Sendable, Hashable {
        public let rawRepresentation: [UInt8]

        public init(rawRepresentation: [UInt8]) throws(CryptoError) {
            guard rawRepresentation.count == Ed25519.keyByteCount else {
                throw CryptoError(operation: "Ed25519 public key", reason: "expected 32 bytes, got \(rawRepresentation.count)")
            }
            self.rawRepresentation = rawRepresentation
        }

        /// Whether `signature` is a valid signature of `message` by this key. Malformed input is simply invalid.
        public func isValidSignature(_ signature: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
            guard signature.count == Ed25519.signatureByteCount,
                let key = try? PKey.ed25519(publicKey: rawRepresentation)
            else { return false }
            return key.verify(Array(signature), message: Array(message), digest: nil)
        }
    }
}

extension PKey {
    /// The raw 32-byte public key of an Ed25519 key.
    fileprivate func rawPublicKey() throws(CryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Ed25519.keyByteCount)
        var length = bytes.count
        try requireOne(EVP_PKEY_get_raw_public_key(pointer, &bytes, &length), "EVP_PKEY_get_raw_public_key")
        return bytes
    }
}
