internal import COpenSSL

/// ECDSA on the NIST P-256 curve with SHA-256 (JOSE's `ES256`), through OpenSSL's EVP interface.
///
/// Signatures are in JOSE's form: the raw 64 bytes `r || s` (RFC 7518 §3.4), not the DER that OpenSSL speaks; the
/// conversion happens inside. ``PrivateKey`` exists so that tests can sign tokens with keys they generate.
public enum P256 {
    /// Bytes in one coordinate, and in each of `r` and `s`.
    public static let coordinateByteCount = 32
    /// Bytes in a raw `r || s` signature.
    public static let signatureByteCount = 64

    fileprivate static let groupName = "prime256v1"

    /// A P-256 public key: the affine coordinates of a point on the curve, as in a JSON Web Key's `x` and `y`.
    public struct PublicKey: Sendable, Hashable {
        public let x: [UInt8]
        public let y: [UInt8]

        /// A key from the big-endian coordinates `x` and `y`, 32 bytes each.
        ///
        /// Throws when a coordinate has the wrong size or the point is not on the curve.
        public init(x: [UInt8], y: [UInt8]) throws(CryptoError) {
            guard x.count == P256.coordinateByteCount, y.count == P256.coordinateByteCount else {
                throw CryptoError(
                    operation: "P-256 public key",
                    reason: "expected 32-byte coordinates, got \(x.count) and \(y.count)")
            }
            self.x = x
            self.y = y
            // OpenSSL refuses a point off the curve while decoding it; the explicit check also covers the identity.
            guard (try? makeKey())?.passesPublicKeyCheck() == true else {
                throw CryptoError(operation: "P-256 public key", reason: "the point is not on the curve")
            }
        }

        /// The uncompressed SEC 1 encoding: `0x04 || x || y`.
        public var x963Representation: [UInt8] { [0x04] + x + y }

        /// Whether `raw64` (`r || s`, 32 bytes each) is a valid ECDSA SHA-256 signature of `message` by this key.
        ///
        /// Malformed input (a wrong length, `r` or `s` out of range) is simply invalid.
        public func isValidSignature(_ raw64: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
            let raw = Array(raw64)
            guard raw.count == P256.signatureByteCount, let der = ECDSASignature.der(fromRaw: raw),
                let key = try? makeKey()
            else { return false }
            return key.verify(der, message: Array(message), digest: EVP_sha256())
        }

        fileprivate func makeKey() throws(CryptoError) -> PKey {
            try PKey.publicKey(algorithm: "EC") { parameters throws(CryptoError) in
                try parameters.pushUTF8String(OSSL_PKEY_PARAM_GROUP_NAME, P256.groupName)
                try parameters.pushOctetString(OSSL_PKEY_PARAM_PUB_KEY, x963Representation)
            }
        }
    }

    /// A P-256 private key, generated here. For tests and tools that need to sign `ES256` tokens.
    public struct PrivateKey: Sendable {
        /// SEC 1 DER. A secret: never log it.
        private let derRepresentation: [UInt8]
        public let publicKey: PublicKey

        /// A new random key.
        public init() throws(CryptoError) {
            let key = try PKey.generate(algorithm: "EC") { EVP_PKEY_CTX_set_group_name($0, P256.groupName) }
            derRepresentation = try key.derPrivateKey()
            let point = try key.octetParameter(OSSL_PKEY_PARAM_PUB_KEY, capacity: 1 + 2 * P256.coordinateByteCount)
            guard point.count == 65, point.first == 0x04 else {
                throw CryptoError(operation: "P-256 key generation", reason: "unexpected public key encoding")
            }
            publicKey = try PublicKey(x: Array(point[1...32]), y: Array(point[33...64]))
        }

        /// The ECDSA SHA-256 signature of `message` as raw `r || s` (64 bytes). Randomized: differs on each call.
        public func signature(for message: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
            let der = try PKey.privateKey(der: derRepresentation).sign(Array(message), digest: EVP_sha256())
            guard let raw = ECDSASignature.raw(fromDER: der) else {
                throw CryptoError(operation: "ECDSA signature", reason: "OpenSSL returned an unexpected encoding")
            }
            return raw
        }
    }
}

/// Converts ECDSA signatures between JOSE's raw `r || s` and the DER `ECDSA-Sig-Value` OpenSSL uses.
enum ECDSASignature {
    /// DER for a raw signature of two equal halves; `nil` when OpenSSL cannot encode it.
    static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        let half = raw.count / 2
        guard half > 0, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(half), nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress.map { $0 + half }, Int32(half), nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {  // set0 takes ownership on success only
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }

    /// Raw `r || s` (each padded to 32 bytes) from DER; `nil` when it does not parse or a half is too large.
    static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else { return nil }
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: P256.signatureByteCount)
        let half = Int32(P256.coordinateByteCount)
        let written = raw.withUnsafeMutableBufferPointer { buffer -> (Int32, Int32) in
            guard let base = buffer.baseAddress else { return (-1, -1) }
            return (
                BN_bn2binpad(ECDSA_SIG_get0_r(signature), base, half),
                BN_bn2binpad(ECDSA_SIG_get0_s(signature), base + Int(half), half)
            )
        }
        return written == (half, half) ? raw : nil
    }
}
