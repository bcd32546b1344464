internal import CLibCrypt

/// Password hashing with bcrypt (`$2b$`) from the system's libcrypt (libxcrypt).
///
/// - Important: Hashing at cost 12 takes a few hundred milliseconds of CPU. Never call these from an event-loop
///   thread; run them on a thread pool.
public enum BCrypt {
    /// The cost the product uses (2^12 rounds).
    public static let defaultCost = 12
    /// bcrypt ignores bytes past 72, so longer passwords are refused rather than silently truncated.
    public static let maxPasswordBytes = 72

    /// A `$2b$` hash of `password` with a fresh random salt.
    public static func hash(_ password: String, cost: Int = defaultCost) throws(CryptoError) -> String {
        guard (4...31).contains(cost) else {
            throw CryptoError(operation: "bcrypt", reason: "cost \(cost) is outside 4...31")
        }
        let salt = SecureRandom.bytes(16)
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        let generated = salt.withUnsafeBufferPointer { random in
            random.withMemoryRebound(to: CChar.self) { random in
                crypt_gensalt_rn("$2b$", UInt(cost), random.baseAddress, Int32(random.count), &setting, Int32(setting.count))
            }
        }
        guard generated != nil else { throw CryptoError(operation: "crypt_gensalt_rn", reason: errnoDescription()) }
        return try crypt(password, setting: String(decoding: setting.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Whether `password` matches `hash`, compared in constant time. A malformed hash never matches.
    public static func verify(_ password: String, against hash: String) -> Bool {
        guard hash.hasPrefix("$2"), let computed = try? crypt(password, setting: hash) else { return false }
        return ConstantTime.equals(Array(computed.utf8), Array(hash.utf8))
    }

    private static func crypt(_ password: String, setting: String) throws(CryptoError) -> String {
        guard password.utf8.count <= maxPasswordBytes else {
            throw CryptoError(operation: "bcrypt", reason: "password longer than \(maxPasswordBytes) bytes")
        }
        // crypt_data is about 32 KiB: keep it on the heap. crypt_rn is thread-safe with a private crypt_data.
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        defer {
            data.initialize(to: crypt_data())  // wipe the copy of the password inside
            data.deallocate()
        }
        data.initialize(to: crypt_data())
        guard let result = crypt_rn(password, setting, data, Int32(MemoryLayout<crypt_data>.size)) else {
            throw CryptoError(operation: "crypt_rn", reason: errnoDescription())
        }
        let output = String(cString: result)
        // libxcrypt signals failure with a string starting with '*' on some paths.
        if output.hasPrefix("*") { throw CryptoError(operation: "crypt_rn", reason: "invalid setting") }
        return output
    }
}

#if canImport(Glibc)
private import Glibc
#endif

private func errnoDescription() -> String {
    String(cString: strerror(errno))
}
