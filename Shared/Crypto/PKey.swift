internal import COpenSSL

/// Owns one `EVP_PKEY` for the length of an operation; the one place the public-key types touch OpenSSL's key API.
///
/// Key types keep their keys as plain bytes (so they are `Sendable` values) and build one of these per operation.
final class PKey {
    let pointer: OpaquePointer

    private init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }

    /// A public key of `algorithm` ("RSA", "EC") from the parameters `build` pushes.
    static func publicKey(
        algorithm: String,
        build: (_ parameters: ParameterBuilder) throws(CryptoError) -> Void
    ) throws(CryptoError) -> PKey {
        let builder = try ParameterBuilder()
        try build(builder)
        guard let parameters = OSSL_PARAM_BLD_to_param(builder.pointer) else {
            throw CryptoError.openSSL("OSSL_PARAM_BLD_to_param")
        }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name(\(algorithm))")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try requireOne(EVP_PKEY_fromdata_init(context), "EVP_PKEY_fromdata_init")
        var key: OpaquePointer?
        try requireOne(
            EVP_PKEY_fromdata(context, &key, habitflow_EVP_PKEY_PUBLIC_KEY(), parameters), "EVP_PKEY_fromdata")
        guard let key else { throw CryptoError.openSSL("EVP_PKEY_fromdata") }
        return PKey(taking: key)
    }

    /// A new random key pair of `algorithm`; `configure` sets its size or curve on the generation context.
    static func generate(
        algorithm: String,
        configure: (_ context: OpaquePointer) -> Int32
    ) throws(CryptoError) -> PKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name(\(algorithm))")
        }
        defer { EVP_PKEY_CTX_free(context) }
        try requireOne(EVP_PKEY_keygen_init(context), "EVP_PKEY_keygen_init")
        try requireOne(configure(context), "configuring \(algorithm) key generation")
        var key: OpaquePointer?
        try requireOne(EVP_PKEY_generate(context, &key), "EVP_PKEY_generate")
        guard let key else { throw CryptoError.openSSL("EVP_PKEY_generate") }
        return PKey(taking: key)
    }

    /// An Ed25519 key from its raw 32-byte private or public encoding.
    static func ed25519(privateKey raw: [UInt8]) throws(CryptoError) -> PKey {
        guard let key = raw.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count)
        }) else { throw CryptoError.openSSL("EVP_PKEY_new_raw_private_key") }
        return PKey(taking: key)
    }

    static func ed25519(publicKey raw: [UInt8]) throws(CryptoError) -> PKey {
        guard let key = raw.withUnsafeBufferPointer({
            EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count)
        }) else { throw CryptoError.openSSL("EVP_PKEY_new_raw_public_key") }
        return PKey(taking: key)
    }

    /// A private key from its DER encoding (the type-specific form ``derPrivateKey()`` writes).
    static func privateKey(der: [UInt8]) throws(CryptoError) -> PKey {
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let key else { throw CryptoError.openSSL("d2i_AutoPrivateKey") }
        return PKey(taking: key)
    }

    /// The private key in DER (PKCS#1 for RSA, SEC 1 for EC).
    func derPrivateKey() throws(CryptoError) -> [UInt8] {
        let length = i2d_PrivateKey(pointer, nil)
        guard length > 0 else { throw CryptoError.openSSL("i2d_PrivateKey") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PrivateKey(pointer, &cursor)
        }
        guard written == length else { throw CryptoError.openSSL("i2d_PrivateKey") }
        return der
    }

    /// The key size in bits (the modulus for RSA, the field for EC).
    var bitCount: Int { Int(EVP_PKEY_get_bits(pointer)) }

    /// A big-number parameter (`"n"`, `"e"`) as big-endian bytes without leading zeros.
    func bigNumberParameter(_ name: String) throws(CryptoError) -> [UInt8] {
        var number: OpaquePointer?
        try requireOne(EVP_PKEY_get_bn_param(pointer, name, &number), "EVP_PKEY_get_bn_param(\(name))")
        guard let number else { throw CryptoError.openSSL("EVP_PKEY_get_bn_param(\(name))") }
        defer { BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: (Int(BN_num_bits(number)) + 7) / 8)
        _ = BN_bn2bin(number, &bytes)
        return bytes
    }

    /// An octet-string parameter (`"pub"`) of at most `capacity` bytes.
    func octetParameter(_ name: String, capacity: Int) throws(CryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: capacity)
        var length = 0
        try requireOne(
            EVP_PKEY_get_octet_string_param(pointer, name, &bytes, capacity, &length),
            "EVP_PKEY_get_octet_string_param(\(name))")
        return Array(bytes.prefix(length))
    }

    /// Whether OpenSSL's own public-key check passes (for EC: the point is on the curve and not the identity).
    func passesPublicKeyCheck() -> Bool {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        let result = EVP_PKEY_public_check(context)
        ERR_clear_error()
        return result == 1
    }

    /// Signs `message`, hashing it with `digest` first (`nil` for Ed25519, which hashes internally).
    func sign(_ message: [UInt8], digest: OpaquePointer?) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        try requireOne(EVP_DigestSignInit(context, nil, digest, nil, pointer), "EVP_DigestSignInit")
        return try message.withUnsafeBufferPointer { message throws(CryptoError) -> [UInt8] in
            var length = 0
            try requireOne(
                EVP_DigestSign(context, nil, &length, message.baseAddress, message.count), "EVP_DigestSign (size)")
            var signature = [UInt8](repeating: 0, count: length)
            try requireOne(
                EVP_DigestSign(context, &signature, &length, message.baseAddress, message.count), "EVP_DigestSign")
            return Array(signature.prefix(length))
        }
    }

    /// Whether `signature` (in OpenSSL's encoding: DER for ECDSA) is valid for `message`.
    func verify(_ signature: [UInt8], message: [UInt8], digest: OpaquePointer?) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()  // a bad signature leaves reasons on the queue; they are not errors of ours
        }
        guard EVP_DigestVerifyInit(context, nil, digest, nil, pointer) == 1 else { return false }
        let result = message.withUnsafeBufferPointer { message in
            signature.withUnsafeBufferPointer { signature in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
            }
        }
        return result == 1
    }
}

/// An `OSSL_PARAM_BLD` with the values pushed onto it.
///
/// OpenSSL 3.0's builder keeps pointers to the pushed numbers, strings and octets and copies them only in
/// `OSSL_PARAM_BLD_to_param`, so this object owns copies of them until it is freed.
final class ParameterBuilder {
    let pointer: OpaquePointer
    private var numbers: [OpaquePointer] = []
    private var buffers: [UnsafeMutablePointer<UInt8>] = []

    init() throws(CryptoError) {
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.openSSL("OSSL_PARAM_BLD_new") }
        pointer = builder
    }

    deinit {
        OSSL_PARAM_BLD_free(pointer)
        numbers.forEach { BN_free($0) }
        buffers.forEach { $0.deallocate() }
    }

    /// A big-endian unsigned integer as a BIGNUM parameter.
    func pushBigNumber(_ name: String, _ bytes: [UInt8]) throws(CryptoError) {
        guard let number = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw CryptoError.openSSL("BN_bin2bn")
        }
        numbers.append(number)
        try requireOne(OSSL_PARAM_BLD_push_BN(pointer, ownedCString(name), number), "OSSL_PARAM_BLD_push_BN(\(name))")
    }

    func pushUTF8String(_ name: String, _ value: String) throws(CryptoError) {
        try requireOne(
            OSSL_PARAM_BLD_push_utf8_string(pointer, ownedCString(name), ownedCString(value), 0),
            "OSSL_PARAM_BLD_push_utf8_string(\(name))")
    }

    func pushOctetString(_ name: String, _ value: [UInt8]) throws(CryptoError) {
        try requireOne(
            OSSL_PARAM_BLD_push_octet_string(pointer, ownedCString(name), owned(value), value.count),
            "OSSL_PARAM_BLD_push_octet_string(\(name))")
    }

    /// A copy of `bytes` that lives as long as this builder.
    private func owned(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        copy.initialize(from: bytes, count: bytes.count)
        buffers.append(copy)
        return copy
    }

    private func ownedCString(_ string: String) -> UnsafeMutablePointer<CChar> {
        UnsafeMutableRawPointer(owned(Array(string.utf8) + [0])).assumingMemoryBound(to: CChar.self)
    }
}

/// Big-endian unsigned integers as JOSE and OpenSSL exchange them.
enum BigEndian {
    /// `bytes` without leading zero bytes (zero itself becomes empty).
    static func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        Array(bytes.drop { $0 == 0 })
    }

    /// The number of significant bits of an already trimmed number.
    static func bitCount(ofTrimmed bytes: [UInt8]) -> Int {
        guard let first = bytes.first else { return 0 }
        return (bytes.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }
}
