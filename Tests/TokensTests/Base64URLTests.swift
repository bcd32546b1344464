import HabitFlowBase64
import HabitFlowCrypto
import HabitFlowTokens
import Testing

@Suite("Base64URL (unpadded, strict) and the EdDSA JWS encoding")
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

    @Test("reproduces the EdDSA JWS of RFC 8037 appendix A.4 byte for byte")
    func rfc8037Example() throws {
        let privateKey = try Ed25519.PrivateKey(
            rawRepresentation: try #require(Base64URL.decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")))
        #expect(
            Base64URL.encode(privateKey.publicKey.rawRepresentation) == "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
        let signingInput =
            Base64URL.encode(Array(#"{"alg":"EdDSA"}"#.utf8)) + "."
            + Base64URL.encode(Array("Example of Ed25519 signing".utf8))
        #expect(signingInput == "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc")
        let signature = try privateKey.signature(for: Array(signingInput.utf8))
        #expect(
            Base64URL.encode(signature)
                == "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg")
    }
}
