import HabitFlowTokens
import Testing

@Suite("Base64URL: unpadded, strict")
struct Base64URLTests {
    @Test("encodes RFC 4648 vectors without padding, in the URL-safe alphabet")
    func encodes() {
        #expect(Base64URL.encode(Array("".utf8)) == "")
        #expect(Base64URL.encode(Array("f".utf8)) == "Zg")
        #expect(Base64URL.encode(Array("fo".utf8)) == "Zm8")
        #expect(Base64URL.encode(Array("foo".utf8)) == "Zm9v")
        #expect(Base64URL.encode(Array("foob".utf8)) == "Zm9vYg")
        #expect(Base64URL.encode(Array("fooba".utf8)) == "Zm9vYmE")
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
    }

    @Test("decodes what it encodes, for every length up to 64")
    func roundTrips() {
        for length in 0...64 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test(
        "refuses padding, standard-alphabet characters, whitespace, lone characters and non-zero spare bits",
        arguments: ["Zg==", "Zm8=", "+/+/", "Zm9v Yg", "Zm9v\n", "Z", "Zm9vY", "Zh", "Zm9", "Zm9vYh", "é"])
    func refuses(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}
