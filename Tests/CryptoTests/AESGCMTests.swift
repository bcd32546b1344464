import HabitFlowCrypto
import Testing

@Suite("OpenSSL: AES-256-GCM")
struct AESGCMTests {
    @Test("opens the published GCM test case 14 (AES-256, zero key and nonce)")
    func knownAnswer() throws {
        // McGrew & Viega, "The Galois/Counter Mode of Operation", test case 14.
        let ciphertext = hexBytes("cea7403d4d606b6e074ec5d3baf39d18")
        let tag = hexBytes("d0d1c8a799996bf0265b98b5d48ab919")
        let box = [UInt8](repeating: 0, count: 12) + ciphertext + tag
        #expect(try AES256GCM.open(box, key: [UInt8](repeating: 0, count: 32)) == [UInt8](repeating: 0, count: 16))
    }

    @Test("seal then open round-trips; a fresh nonce makes every box different")
    func roundTrip() throws {
        let key = SecureRandom.bytes(32)
        let secret = Array("an Ed25519 seed, 32 bytes long!!".utf8)
        let first = try AES256GCM.seal(secret, key: key, additionalData: Array("key-1".utf8))
        let second = try AES256GCM.seal(secret, key: key, additionalData: Array("key-1".utf8))
        #expect(first != second)
        #expect(first.count == 12 + secret.count + 16)
        #expect(try AES256GCM.open(first, key: key, additionalData: Array("key-1".utf8)) == secret)
        #expect(try AES256GCM.open(try AES256GCM.seal([UInt8](), key: key), key: key) == [])
    }

    @Test("a wrong key, other additional data, a flipped bit or a short box fail to open")
    func tampering() throws {
        let key = SecureRandom.bytes(32)
        let box = try AES256GCM.seal(Array("secret".utf8), key: key, additionalData: Array("key-1".utf8))
        #expect(throws: CryptoError.self) {
            try AES256GCM.open(box, key: SecureRandom.bytes(32), additionalData: Array("key-1".utf8))
        }
        #expect(throws: CryptoError.self) { try AES256GCM.open(box, key: key, additionalData: Array("key-2".utf8)) }
        for index in [0, 12, box.count - 1] {
            var flipped = box
            flipped[index] ^= 0x01
            #expect(throws: CryptoError.self) {
                try AES256GCM.open(flipped, key: key, additionalData: Array("key-1".utf8))
            }
        }
        #expect(throws: CryptoError.self) { try AES256GCM.open(box.prefix(27), key: key) }
        #expect(throws: CryptoError.self) { try AES256GCM.seal([1], key: [1, 2, 3]) }
    }
}

private func hexBytes(_ hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        if let byte = UInt8(hex[index..<next], radix: 16) { result.append(byte) }
        index = next
    }
    return result
}
