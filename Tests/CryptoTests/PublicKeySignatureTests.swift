import Foundation
import HabitFlowCrypto
import HabitFlowTestSupport
import Testing

/// Published JWS examples (RFC 7515 appendix A): keys, signing input and signatures.
private enum RFC7515 {
    /// BASE64URL(header) "." BASE64URL(payload) of A.2 (RS256); A.3 differs in the header only.
    static let payload =
        "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    static let rs256SigningInput = "eyJhbGciOiJSUzI1NiJ9." + payload
    static let es256SigningInput = "eyJhbGciOiJFUzI1NiJ9." + payload

    static let rsaModulus =
        "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pC"
        + "gNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2Ca"
        + "pHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9g"
        + "b54h4FRWyuXpoQ"
    static let rsaExponent = "AQAB"
    static let rs256Signature =
        "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CU"
        + "Ar7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_d"
        + "O--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0ig"
        + "cN_IoypGlUPQGe77Rw"

    static let ecX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let ecY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let es256Signature = "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"

    static func rsaKey() throws -> RSA.PublicKey {
        try RSA.PublicKey(modulus: base64URL(rsaModulus), exponent: base64URL(rsaExponent))
    }

    static func ecKey() throws -> P256.PublicKey {
        try P256.PublicKey(x: base64URL(ecX), y: base64URL(ecY))
    }
}

/// Test-side base64url (with Foundation), independent of the module under test.
private func base64URL(_ text: String) -> [UInt8] {
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
    return Array(Data(base64Encoded: standard) ?? Data())
}

private func flipping(_ bytes: [UInt8], at index: Int) -> [UInt8] {
    var bytes = bytes
    bytes[index] ^= 0x01
    return bytes
}

/// Runs the openssl command line on a thread of its own (key generation takes a while, and a blocked cooperative
/// thread would slow every other test); fails the test with its output when it fails.
private func openssl(_ arguments: [String]) async throws -> String {
    let result = try await run("/usr/bin/openssl", arguments)
    try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.output)")
    return result.output
}

/// What the openssl command line made: a key pair (`keyPath`, for more openssl commands) and its SHA-256 signature of
/// `message`, in openssl's own encoding (DER for ECDSA), in `directory`.
private struct OpenSSLSignature {
    var directory: String
    var keyPath: String
    var message: [UInt8]
    var signature: [UInt8]
}

/// Generates a key with `openssl genpkey -algorithm ALGORITHM -pkeyopt OPTION`, signs a fresh message with
/// `openssl dgst -sha256 -sign` and hands both to `body` in a temporary directory removed afterwards.
private func withOpenSSLSignature(
    algorithm: String,
    keyOption: String,
    _ body: (OpenSSLSignature) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("habitflow-crypto-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let keyPath = "\(directory)/key.pem"
    _ = try await openssl(["genpkey", "-algorithm", algorithm, "-pkeyopt", keyOption, "-out", keyPath])
    let message = "signed by openssl \(UUID())"
    try message.write(toFile: "\(directory)/message", atomically: true, encoding: .utf8)
    _ = try await openssl(
        ["dgst", "-sha256", "-sign", keyPath, "-out", "\(directory)/signature", "\(directory)/message"])
    let signature = Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/signature")))
    try await body(
        OpenSSLSignature(directory: directory, keyPath: keyPath, message: Array(message.utf8), signature: signature))
}

private func bytes(hex: String) -> [UInt8] {
    let digits = Array(hex.utf8)
    return stride(from: 0, to: digits.count - 1, by: 2).compactMap {
        UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)
    }
}

/// The two INTEGERs of a DER `ECDSA-Sig-Value`, each left-padded to 32 bytes: JOSE's `r || s`.
private func rawSignature(fromDER der: [UInt8]) throws -> [UInt8] {
    var index = 0
    func readLength() throws -> Int {
        let first = Int(der[index])
        index += 1
        guard first & 0x80 != 0 else { return first }
        var length = 0
        for _ in 0..<(first & 0x7F) {
            length = length << 8 | Int(der[index])
            index += 1
        }
        return length
    }
    try #require(der[index] == 0x30)
    index += 1
    _ = try readLength()
    var raw: [UInt8] = []
    for _ in 0..<2 {
        try #require(der[index] == 0x02)
        index += 1
        let length = try readLength()
        let integer = Array(der[index..<index + length].drop { $0 == 0 })
        index += length
        raw += [UInt8](repeating: 0, count: 32 - integer.count) + integer
    }
    return raw
}

@Suite("RSA: RS256 (PKCS #1 v1.5, SHA-256)")
struct RSATests {
    @Test("verifies the RS256 example of RFC 7515 appendix A.2")
    func rfc7515Example() throws {
        let key = try RFC7515.rsaKey()
        #expect(key.modulusBitCount == 2048)
        #expect(key.exponent == [1, 0, 1])
        let message = Array(RFC7515.rs256SigningInput.utf8)
        let signature = base64URL(RFC7515.rs256Signature)
        #expect(key.isValidSignature(signature, for: message))

        #expect(!key.isValidSignature(signature, for: flipping(message, at: 40)))
        #expect(!key.isValidSignature(flipping(signature, at: 100), for: message))
        #expect(!key.isValidSignature(signature.dropLast(), for: message))
        #expect(!key.isValidSignature([0] + signature, for: message))
        #expect(!key.isValidSignature([UInt8](), for: message))
        #expect(!(try RSA.PrivateKey()).publicKey.isValidSignature(signature, for: message))
    }

    @Test("signs with a generated key; only that key and that message verify")
    func signAndVerify() throws {
        let key = try RSA.PrivateKey(bits: 2048)
        #expect(key.publicKey.modulus.count == 256)
        #expect(key.publicKey.exponent == [1, 0, 1])
        let message = Array("header.payload".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 256)
        // PKCS #1 v1.5 is deterministic.
        #expect(try key.signature(for: message) == signature)
        let rebuilt = try RSA.PublicKey(
            modulus: [0, 0] + key.publicKey.modulus, exponent: [0] + key.publicKey.exponent)
        #expect(rebuilt == key.publicKey)
        #expect(rebuilt.isValidSignature(signature, for: message))
        #expect(!rebuilt.isValidSignature(signature, for: Array("header.payloaD".utf8)))
        #expect(!(try RSA.PrivateKey()).publicKey.isValidSignature(signature, for: message))
    }

    @Test("verifies a signature made by the openssl command line")
    func opensslSignature() async throws {
        try await withOpenSSLSignature(algorithm: "RSA", keyOption: "rsa_keygen_bits:3072") { made in
            let modulusLine = try await openssl(["rsa", "-in", made.keyPath, "-noout", "-modulus"])
            let modulus = bytes(
                hex: String(modulusLine.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("Modulus=".count)))
            let key = try RSA.PublicKey(modulus: modulus, exponent: [1, 0, 1])
            #expect(key.modulusBitCount == 3072)
            #expect(key.isValidSignature(made.signature, for: made.message))
            #expect(!key.isValidSignature(made.signature, for: made.message + [0]))
        }
    }

    @Test("refuses moduli under 2048 bits, bad exponents and small generated keys")
    func refusesWeakKeys() throws {
        let modulus = base64URL(RFC7515.rsaModulus)
        // The top 1024 bits of a real modulus, made odd: a well-formed but too small key.
        var small = Array(modulus.prefix(128))
        small[127] |= 1
        #expect(throws: CryptoError.self) { try RSA.PublicKey(modulus: small, exponent: [1, 0, 1]) }
        #expect(throws: CryptoError.self) {
            try RSA.PublicKey(modulus: Array(modulus.dropFirst()), exponent: [1, 0, 1])
        }
        #expect(throws: CryptoError.self) { try RSA.PublicKey(modulus: [UInt8](), exponent: [1, 0, 1]) }
        #expect(throws: CryptoError.self) {
            try RSA.PublicKey(modulus: [UInt8](repeating: 0xFF, count: 1025), exponent: [3])
        }
        #expect(throws: CryptoError.self) { try RSA.PublicKey(modulus: modulus, exponent: [1]) }
        #expect(throws: CryptoError.self) { try RSA.PublicKey(modulus: modulus, exponent: [1, 0, 0]) }
        #expect(throws: CryptoError.self) { try RSA.PublicKey(modulus: modulus, exponent: []) }
        #expect(throws: CryptoError.self) {
            try RSA.PublicKey(modulus: modulus, exponent: [UInt8](repeating: 1, count: 9))
        }
        #expect(throws: CryptoError.self) { try RSA.PrivateKey(bits: 1024) }
        #expect(try RSA.PublicKey(modulus: modulus, exponent: [3]).exponent == [3])
    }
}

@Suite("P-256: ES256 (ECDSA, SHA-256, raw r || s)")
struct P256Tests {
    @Test("verifies the ES256 example of RFC 7515 appendix A.3")
    func rfc7515Example() throws {
        let key = try RFC7515.ecKey()
        #expect(key.x963Representation.count == 65)
        let message = Array(RFC7515.es256SigningInput.utf8)
        let signature = base64URL(RFC7515.es256Signature)
        #expect(signature.count == 64)
        #expect(key.isValidSignature(signature, for: message))

        #expect(!key.isValidSignature(signature, for: flipping(message, at: 10)))
        #expect(!key.isValidSignature(flipping(signature, at: 5), for: message))  // r
        #expect(!key.isValidSignature(flipping(signature, at: 40), for: message))  // s
        #expect(!key.isValidSignature(signature.dropLast(), for: message))
        #expect(!key.isValidSignature(signature + [0], for: message))
        #expect(!(try P256.PrivateKey()).publicKey.isValidSignature(signature, for: message))
    }

    @Test("signs raw r || s with a generated key; signatures are randomized and all verify")
    func signAndVerify() throws {
        let key = try P256.PrivateKey()
        #expect(key.publicKey.x.count == 32 && key.publicKey.y.count == 32)
        let message = Array("header.payload".utf8)
        let first = try key.signature(for: message)
        let second = try key.signature(for: message)
        #expect(first.count == 64 && second.count == 64)
        #expect(first != second)
        let rebuilt = try P256.PublicKey(x: key.publicKey.x, y: key.publicKey.y)
        #expect(rebuilt.isValidSignature(first, for: message))
        #expect(rebuilt.isValidSignature(second, for: message))
        #expect(!rebuilt.isValidSignature(first, for: Array("header.payloaD".utf8)))
        #expect(!(try P256.PrivateKey()).publicKey.isValidSignature(first, for: message))
    }

    @Test("refuses r or s of zero or at least the group order")
    func refusesOutOfRangeSignatures() throws {
        let key = try RFC7515.ecKey()
        let message = Array(RFC7515.es256SigningInput.utf8)
        let signature = base64URL(RFC7515.es256Signature)
        let order = bytes(hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        #expect(!key.isValidSignature([UInt8](repeating: 0, count: 32) + signature.suffix(32), for: message))
        #expect(!key.isValidSignature(signature.prefix(32) + [UInt8](repeating: 0, count: 32), for: message))
        #expect(!key.isValidSignature(order + signature.suffix(32), for: message))
        #expect(!key.isValidSignature([UInt8](repeating: 0xFF, count: 64), for: message))
    }

    @Test("verifies a signature made by the openssl command line (DER converted to r || s)")
    func opensslSignature() async throws {
        try await withOpenSSLSignature(algorithm: "EC", keyOption: "ec_paramgen_curve:P-256") { made in
            _ = try await openssl(
                ["pkey", "-in", made.keyPath, "-pubout", "-outform", "DER", "-out", "\(made.directory)/public.der"])
            // SubjectPublicKeyInfo for P-256 ends with the 65-byte uncompressed point.
            let point = Array(try Data(contentsOf: URL(fileURLWithPath: "\(made.directory)/public.der")).suffix(65))
            try #require(point.first == 0x04)
            let key = try P256.PublicKey(x: Array(point[1...32]), y: Array(point[33...64]))
            let raw = try rawSignature(fromDER: made.signature)
            #expect(key.isValidSignature(raw, for: made.message))
            #expect(!key.isValidSignature(made.signature, for: made.message))  // DER is not the JOSE form
            #expect(!key.isValidSignature(raw, for: made.message + [0]))
        }
    }

    @Test("refuses points off the curve and coordinates of the wrong size")
    func refusesBadPoints() throws {
        let x = base64URL(RFC7515.ecX)
        var y = base64URL(RFC7515.ecY)
        y[31] ^= 1
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: x, y: y) }
        #expect(throws: CryptoError.self) {
            try P256.PublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32))
        }
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: Array(x.dropFirst()), y: base64URL(RFC7515.ecY)) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: x + [0], y: base64URL(RFC7515.ecY)) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: [], y: []) }
    }
}
