import HabitFlowCrypto
import Testing

private func bytes(hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        result.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return result
}

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

@Suite("OpenSSL: Ed25519, SHA-256, HMAC, random")
struct OpenSSLTests {
    @Test("Ed25519 matches RFC 8032 test vector 1")
    func rfc8032Vector() throws {
        let key = try Ed25519.PrivateKey(
            rawRepresentation: bytes(hex: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
        #expect(hex(key.publicKey.rawRepresentation) == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let signature = try key.signature(for: [UInt8]())
        #expect(
            hex(signature)
                == "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        )
        #expect(key.publicKey.isValidSignature(signature, for: [UInt8]()))
    }

    @Test("Ed25519 signatures verify only for the signed message and the signing key")
    func signAndVerify() throws {
        let key = try Ed25519.PrivateKey()
        let message = Array("user=42;session=7".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))

        var tamperedMessage = message
        tamperedMessage[5] ^= 1
        #expect(!key.publicKey.isValidSignature(signature, for: tamperedMessage))
        var tamperedSignature = signature
        tamperedSignature[10] ^= 0x80
        #expect(!key.publicKey.isValidSignature(tamperedSignature, for: message))
        #expect(!(try Ed25519.PrivateKey()).publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(signature.prefix(63), for: message))
        #expect(throws: CryptoError.self) { try Ed25519.PublicKey(rawRepresentation: [1, 2, 3]) }
    }

    @Test("SHA-256 and HMAC-SHA-256 match their published test vectors")
    func digests() {
        #expect(hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // RFC 4231 test case 2.
        #expect(
            hex(SHA256.hmac(key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // RFC 4231 test case 6: a key longer than SHA-256's block is hashed first.
        #expect(
            hex(SHA256.hmac(
                key: [UInt8](repeating: 0xAA, count: 131),
                data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test("a prepared HMAC key signs message after message like a fresh one")
    func preparedHMACKey() {
        let key = SHA256.HMACKey(Array("Jefe".utf8))
        for _ in 0..<3 {
            #expect(
                hex(key.authenticationCode(for: Array("what do ya want for nothing?".utf8)))
                    == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
            // RFC 4231 test case 1's data under test case 2's key, checked against the one-shot form.
            #expect(key.authenticationCode(for: Array("Hi There".utf8))
                == SHA256.hmac(key: Array("Jefe".utf8), data: Array("Hi There".utf8)))
        }
        #expect(hex(SHA256.HMACKey([UInt8](repeating: 0x0B, count: 20)).authenticationCode(for: Array("Hi There".utf8)))
            == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(key.authenticationCode(for: []).count == SHA256.byteCount)
    }

    @Test("secure random bytes differ between calls and compare in constant time")
    func randomAndConstantTime() {
        let first = SecureRandom.bytes(32)
        let second = SecureRandom.bytes(32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect(ConstantTime.equals(first, first))
        #expect(!ConstantTime.equals(first, second))
        #expect(!ConstantTime.equals(first, first.prefix(31)))
    }
}

@Suite("libcrypt: bcrypt")
struct BCryptTests {
    @Test("hashes with $2b$ at cost 12 and verifies only the right password")
    func hashAndVerify() throws {
        let hash = try BCrypt.hash("correct horse battery staple")
        #expect(hash.hasPrefix("$2b$12$"))
        #expect(hash.count == 60)
        #expect(BCrypt.verify("correct horse battery staple", against: hash))
        #expect(!BCrypt.verify("correct horse battery stapler", against: hash))
        #expect(try BCrypt.hash("correct horse battery staple") != hash, "every hash gets a fresh salt")
    }

    @Test("verifies a published OpenBSD bcrypt vector")
    func knownVector() {
        #expect(BCrypt.verify("U*U", against: "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"))
        #expect(!BCrypt.verify("U*V", against: "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"))
    }

    @Test("refuses passwords bcrypt would truncate and never matches a malformed hash")
    func limits() {
        #expect(throws: CryptoError.self) { try BCrypt.hash(String(repeating: "a", count: 73), cost: 4) }
        #expect(!BCrypt.verify("anything", against: "not-a-hash"))
        #expect(!BCrypt.verify("anything", against: ""))
    }
}
