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
            let key = try EVPKey(privateKey: rawRepresentation)
            self.rawRepresentation = rawRepresentation
            self.publicKey = try PublicKey(rawRepresentation: key.rawPublicKey())
        }

        /// The 64-byte signature of `message`.
        public func signature(for message: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
            try EVPKey(privateKey: rawRepresentation).sign(Array(message))
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
                let key = try? EVPKey(publicKey: rawRepresentation)
            else { return false }
            return key.verify(Array(signature), message: Array(message))
        }
    }
}

/// Owns one `EVP_PKEY` for the length of an operation.
private final class EVPKey {
    let pointer: OpaquePointer

    init(privateKey raw: [UInt8]) throws(CryptoError) {
        guard let key = raw.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count)
        }) else { throw CryptoError.openSSL("EVP_PKEY_new_raw_private_key") }
        pointer = key
    }

    init(publicKey raw: [UInt8]) throws(CryptoError) {
        guard let key = raw.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count)
        }) else { throw CryptoError.openSSL("EVP_PKEY_new_raw_public_key") }
        pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    func rawPublicKey() throws(CryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Ed25519.keyByteCount)
        var length = bytes.count
        try requireOne(EVP_PKEY_get_raw_public_key(pointer, &bytes, &length), "EVP_PKEY_get_raw_public_key")
        return bytes
    }

    func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        // Ed25519 hashes internally: the digest argument must be NULL and signing is one-shot.
        try requireOne(EVP_DigestSignInit(context, nil, nil, nil, pointer), "EVP_DigestSignInit")
        var signature = [UInt8](repeating: 0, count: Ed25519.signatureByteCount)
        var length = signature.count
        try requireOne(
            message.withUnsafeBufferPointer { EVP_DigestSign(context, &signature, &length, $0.baseAddress, $0.count) },
            "EVP_DigestSign")
        return Array(signature.prefix(length))
    }

    func verify(_ signature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, pointer) == 1 else { return false }
        let result = message.withUnsafeBufferPointer { message in
            signature.withUnsafeBufferPointer { signature in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
            }
        }
        ERR_clear_error()
        return result == 1
    }
}
