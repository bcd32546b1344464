internal import COpenSSL

/// RSA signatures with PKCS #1 v1.5 padding and SHA-256 (JOSE's `RS256`), through OpenSSL's EVP interface.
///
/// Verification is what the product needs (Google's and Apple's ID tokens are `RS256`); ``PrivateKey`` exists so that
/// tests can sign tokens with keys they generate.
public enum RSA {
    /// Moduli below this are refused: 1024-bit RSA is breakable, and no OIDC provider we accept uses it.
    public static let minimumModulusBits = 2048
    /// Moduli above this are refused, so a hostile key set cannot make verification arbitrarily slow.
    public static let maximumModulusBits = 8192

    /// An RSA public key: the modulus `n` and public exponent `e`, as in a JSON Web Key.
    public struct PublicKey: Sendable, Hashable {
        /// The modulus, big-endian without leading zero bytes.
        public let modulus: [UInt8]
        /// The public exponent, big-endian without leading zero bytes (usually `[1, 0, 1]`, 65537).
        public let exponent: [UInt8]

        /// A key from big-endian `modulus` and `exponent` (a JWK's decoded `n` and `e`; leading zeros are ignored).
        ///
        /// Throws when the modulus is outside ``RSA/minimumModulusBits``...``RSA/maximumModulusBits``, when the
        /// exponent is not an odd number from 3 to 2^64 - 1, or when OpenSSL refuses the key.
        public init(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) {
            let modulus = BigEndian.trimmed(modulus)
            let exponent = BigEndian.trimmed(exponent)
            let bits = BigEndian.bitCount(ofTrimmed: modulus)
            guard (RSA.minimumModulusBits...RSA.maximumModulusBits).contains(bits) else {
                throw CryptoError(
                    operation: "RSA public key",
                    reason: "modulus of \(bits) bits is outside \(RSA.minimumModulusBits)...\(RSA.maximumModulusBits)")
            }
            guard let last = exponent.last, exponent.count <= 8, last & 1 == 1, exponent != [1] else {
                throw CryptoError(
                    operation: "RSA public key", reason: "the exponent must be odd, at least 3 and at most 64 bits")
            }
            guard modulus.last.map({ $0 & 1 == 1 }) == true else {
                throw CryptoError(operation: "RSA public key", reason: "the modulus is even")
            }
            self.modulus = modulus
            self.exponent = exponent
            _ = try makeKey()  // OpenSSL's own checks, once, so verification never meets a key it refuses
        }

        /// The size of the modulus in bits (2048 for Google's and Apple's keys).
        public var modulusBitCount: Int { BigEndian.bitCount(ofTrimmed: modulus) }

        /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 SHA-256 signature of `message` by this key.
        ///
        /// A signature whose length is not the modulus length, or any other malformed input, is simply invalid.
        public func isValidSignature(_ signature: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
            guard signature.count == modulus.count, let key = try? makeKey() else { return false }
            return key.verify(Array(signature), message: Array(message), digest: EVP_sha256())
        }

        fileprivate func makeKey() throws(CryptoError) -> PKey {
            try PKey.publicKey(algorithm: "RSA") { parameters throws(CryptoError) in
                try parameters.pushBigNumber(OSSL_PKEY_PARAM_RSA_N, modulus)
                try parameters.pushBigNumber(OSSL_PKEY_PARAM_RSA_E, exponent)
            }
        }
    }

    /// An RSA private key, generated here. For tests and tools that need to sign `RS256` tokens.
    public struct PrivateKey: Sendable {
        /// PKCS #1 DER. A secret: never log it.
        private let derRepresentation: [UInt8]
        public let publicKey: PublicKey

        /// A new random key with a `bits`-bit modulus and exponent 65537.
        ///
        /// - Important: Generating a 2048-bit key takes tens to hundreds of milliseconds of CPU.
        public init(bits: Int = 2048) throws(CryptoError) {
            guard (RSA.minimumModulusBits...RSA.maximumModulusBits).contains(bits) else {
                throw CryptoError(operation: "RSA key generation", reason: "\(bits) bits is outside the accepted sizes")
            }
            let key = try PKey.generate(algorithm: "RSA") { EVP_PKEY_CTX_set_rsa_keygen_bits($0, Int32(bits)) }
            derRepresentation = try key.derPrivateKey()
            publicKey = try PublicKey(
                modulus: key.bigNumberParameter(OSSL_PKEY_PARAM_RSA_N),
                exponent: key.bigNumberParameter(OSSL_PKEY_PARAM_RSA_E))
        }

        /// The RSASSA-PKCS1-v1_5 SHA-256 signature of `message` (as long as the modulus).
        public func signature(for message: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
            try PKey.privateKey(der: derRepresentation).sign(Array(message), digest: EVP_sha256())
        }
    }
}
