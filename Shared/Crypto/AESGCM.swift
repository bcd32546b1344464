internal import COpenSSL

/// Authenticated encryption with AES-256-GCM (OpenSSL), for secrets kept at rest such as signing keys.
///
/// A sealed box is `nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes)`, with a fresh random nonce per seal.
public enum AES256GCM {
    public static let keyByteCount = 32
    public static let nonceByteCount = 12
    public static let tagByteCount = 16

    /// Encrypts `plaintext` under `key`; `additionalData` is authenticated but not encrypted (bind the box to its
    /// context, for example a record id, so it cannot be moved to another record).
    public static func seal(
        _ plaintext: some Collection<UInt8>, key: some Collection<UInt8>, additionalData: some Collection<UInt8> = []
    ) throws(CryptoError) -> [UInt8] {
        let key = Array(key)
        try checkKey(key)
        let nonce = SecureRandom.bytes(nonceByteCount)
        let context = try CipherContext()
        try requireOne(
            EVP_EncryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil), "EVP_EncryptInit_ex(aes-256-gcm)")
        try requireOne(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceByteCount), nil),
            "set GCM IV length")
        try requireOne(EVP_EncryptInit_ex(context.pointer, nil, nil, key, nonce), "EVP_EncryptInit_ex(key)")
        try context.update(additionalData: Array(additionalData), encrypting: true)
        let input = Array(plaintext)
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var written: Int32 = 0
        if !input.isEmpty {
            try requireOne(
                EVP_EncryptUpdate(context.pointer, &output, &written, input, Int32(input.count)), "EVP_EncryptUpdate")
        }
        var finalWritten: Int32 = 0
        try requireOne(
            output.withUnsafeMutableBufferPointer { buffer in
                // GCM's final step writes nothing; the pointer just has to be valid (the buffer is never empty).
                guard let base = buffer.baseAddress else { return 0 }
                return EVP_EncryptFinal_ex(context.pointer, base + Int(written), &finalWritten)
            }, "EVP_EncryptFinal_ex")
        var tag = [UInt8](repeating: 0, count: tagByteCount)
        try requireOne(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), &tag), "get GCM tag")
        return nonce + output.prefix(Int(written + finalWritten)) + tag
    }

    /// Decrypts a box made by ``seal(_:key:additionalData:)``. Throws when the key, the additional data or any byte
    /// of the box is not what sealed it.
    public static func open(
        _ sealed: some Collection<UInt8>, key: some Collection<UInt8>, additionalData: some Collection<UInt8> = []
    ) throws(CryptoError) -> [UInt8] {
        let key = Array(key)
        try checkKey(key)
        let sealed = Array(sealed)
        guard sealed.count >= nonceByteCount + tagByteCount else {
            throw CryptoError(operation: "AES-256-GCM open", reason: "sealed box too short")
        }
        let nonce = Array(sealed.prefix(nonceByteCount))
        let ciphertext = Array(sealed.dropFirst(nonceByteCount).dropLast(tagByteCount))
        var tag = Array(sealed.suffix(tagByteCount))
        let context = try CipherContext()
        try requireOne(
            EVP_DecryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil), "EVP_DecryptInit_ex(aes-256-gcm)")
        try requireOne(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceByteCount), nil),
            "set GCM IV length")
        try requireOne(EVP_DecryptInit_ex(context.pointer, nil, nil, key, nonce), "EVP_DecryptInit_ex(key)")
        try context.update(additionalData: Array(additionalData), encrypting: false)
        var output = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            try requireOne(
                EVP_DecryptUpdate(context.pointer, &output, &written, ciphertext, Int32(ciphertext.count)),
                "EVP_DecryptUpdate")
        }
        try requireOne(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &tag), "set GCM tag")
        var finalWritten: Int32 = 0
        let verified = output.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return Int32(0) }
            return EVP_DecryptFinal_ex(context.pointer, base + Int(written), &finalWritten)
        }
        guard verified == 1 else {
            ERR_clear_error()
            throw CryptoError(operation: "AES-256-GCM open", reason: "authentication failed")
        }
        return Array(output.prefix(Int(written + finalWritten)))
    }

    private static func checkKey(_ key: [UInt8]) throws(CryptoError) {
        guard key.count == keyByteCount else {
            throw CryptoError(operation: "AES-256-GCM", reason: "expected a \(keyByteCount)-byte key, got \(key.count)")
        }
    }
}

/// Owns one `EVP_CIPHER_CTX` for the length of an operation.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("EVP_CIPHER_CTX_new") }
        pointer = context
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    func update(additionalData: [UInt8], encrypting: Bool) throws(CryptoError) {
        guard !additionalData.isEmpty else { return }
        var ignored: Int32 = 0
        let result =
            encrypting
            ? EVP_EncryptUpdate(pointer, nil, &ignored, additionalData, Int32(additionalData.count))
            : EVP_DecryptUpdate(pointer, nil, &ignored, additionalData, Int32(additionalData.count))
        try requireOne(result, "GCM additional data")
    }
}
