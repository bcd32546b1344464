import HabitFlowBase64
import Foundation
import HabitFlowCrypto
import HabitFlowTokens
import Testing

private func isMalformed(_ body: () throws(TokenError) -> JSONWebKeySet) -> Bool {
    if case .malformed = tokenError(body) { return true }
    return false
}

private func keySet(_ json: String) throws(TokenError) -> JSONWebKeySet {
    try JSONWebKeySet(json: Data(json.utf8))
}

@Suite("JWK Sets: parse and produce")
struct JSONWebKeySetTests {
    @Test("parses a Google-style key set: two RS256 keys by kid")
    func google() throws {
        let set = try keySet(RealWorldKeySets.google)
        #expect(set.keys.count == 2)
        let first = try #require(set["a50f6e70ef4b548a5fd9142eecd1fb8f54dce9ee"])
        #expect(first.algorithm == "RS256" && first.use == "sig")
        guard case .rsa(let key) = first.publicKey else {
            Issue.record("not an RSA key")
            return
        }
        #expect(key.modulusBitCount == 2048)
        #expect(key.exponent == [1, 0, 1])
        #expect(Base64URL.encode(key.modulus) == RealWorldKeySets.googleModulus1)
        #expect(set.key(id: "07b80a365428525f8bf7cd0846d74a8ee4ef3625")?.publicKey.algorithm == "RS256")
        #expect(set["missing"] == nil)
    }

    @Test("parses an Apple-style key set")
    func apple() throws {
        let set = try keySet(RealWorldKeySets.apple)
        #expect(set.keys.map(\.keyID) == ["Sf2lFqwkpX"])
        #expect(set["Sf2lFqwkpX"]?.publicKey.algorithm == "RS256")
    }

    @Test("produces a set that parses back to the same keys, Ed25519, RSA and P-256, without private members")
    func roundTrip() throws {
        let ed25519 = try SigningKey.generate().verificationKey()
        let rsa = try RSA.PrivateKey().publicKey
        let p256 = try P256.PrivateKey().publicKey
        let set = JSONWebKeySet(keys: [
            ed25519.jsonWebKey,
            JSONWebKey(keyID: "rsa-1", publicKey: .rsa(rsa)),
            JSONWebKey(keyID: "ec-1", publicKey: .p256(p256), use: nil, algorithm: nil),
        ])
        let json = set.json()
        #expect(try JSONWebKeySet(json: json) == set)

        let document = try #require(try JSONSerialization.jsonObject(with: json) as? [String: [[String: String]]])
        let keys = try #require(document["keys"])
        #expect(
            keys[0] == [
                "kty": "OKP", "crv": "Ed25519", "x": Base64URL.encode(ed25519.publicKey.rawRepresentation),
                "kid": ed25519.keyID, "use": "sig", "alg": "EdDSA",
            ])
        #expect(keys[1]["kty"] == "RSA" && keys[1]["e"] == "AQAB" && keys[1]["alg"] == "RS256")
        #expect(
            keys[2]["kty"] == "EC" && keys[2]["crv"] == "P-256" && keys[2]["alg"] == "ES256" && keys[2]["use"] == nil)
        #expect(keys.allSatisfy { $0["d"] == nil })

        #expect(VerificationKey(try #require(try JSONWebKeySet(json: json)[ed25519.keyID])) == ed25519)
        #expect(VerificationKey(JSONWebKey(keyID: "rsa-1", publicKey: .rsa(rsa))) == nil)
        #expect(VerificationKey(JSONWebKey(keyID: nil, publicKey: .ed25519(ed25519.publicKey))) == nil)
    }

    @Test("skips key kinds it does not verify: oct, P-384, X25519, RS512-only keys")
    func skipsUnknownKinds() throws {
        let p256 = try P256.PrivateKey().publicKey
        let set = try keySet(
            """
            {"keys":[
              {"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow","kid":"hmac"},
              {"kty":"EC","crv":"P-384","x":"AAAA","y":"AAAA","kid":"p384"},
              {"kty":"OKP","crv":"X25519","x":"AAAA","kid":"x25519"},
              {"kty":"RSA","alg":"RS512","n":"\(RealWorldKeySets.googleModulus1)","e":"AQAB","kid":"rs512"},
              {"kty":"EC","crv":"P-256","x":"\(Base64URL.encode(p256.x))","y":"\(Base64URL.encode(p256.y))","kid":"ec","key_ops":["verify"],"x5c":["MIIB"]}
            ],"extra":true}
            """)
        #expect(set.keys.map(\.keyID) == ["ec"])
        #expect(set["ec"]?.publicKey == .p256(p256))
    }

    @Test("refuses documents that are not JWK Sets, broken material and private keys")
    func refusesBrokenDocuments() throws {
        let p256 = try P256.PrivateKey().publicKey
        let x = Base64URL.encode(p256.x)
        let y = Base64URL.encode(p256.y)
        var offCurve = p256.y
        offCurve[31] ^= 1
        let weakModulus = String(RealWorldKeySets.googleModulus1.prefix(171)) + "Q"  // 1024-ish bits, odd
        let documents = [
            "", "not json", "[]", "{}", #"{"keys":{}}"#, #"{"keys":[1]}"#, #"{"keys":[{"kty":7}]}"#,
            #"{"keys":[{"kty":"RSA","e":"AQAB"}]}"#,
            #"{"keys":[{"kty":"RSA","n":"\#(RealWorldKeySets.googleModulus1)","e":"AQAB="}]}"#,
            #"{"keys":[{"kty":"RSA","n":"\#(weakModulus)","e":"AQAB"}]}"#,
            #"{"keys":[{"kty":"EC","crv":"P-256","x":"\#(x)"}]}"#,
            #"{"keys":[{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(Base64URL.encode(offCurve))"}]}"#,
            #"{"keys":[{"kty":"EC","crv":"P-256","x":"\#(x)AA","y":"\#(y)"}]}"#,
            #"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA"}]}"#,
            #"{"keys":[{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(y)","d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"}]}"#,
        ]
        for document in documents {
            #expect(isMalformed { () throws(TokenError) in try keySet(document) }, "\(document.prefix(80))")
        }
        let huge = Data(repeating: UInt8(ascii: " "), count: JSONWebKeySet.maximumByteCount + 1)
        #expect(isMalformed { () throws(TokenError) in try JSONWebKeySet(json: huge) })
        #expect(try keySet(#"{"keys":[]}"#).keys.isEmpty)
    }
}
