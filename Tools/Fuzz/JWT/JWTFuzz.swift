internal import Foundation
internal import HabitFlowBase64
internal import HabitFlowCrypto
internal import HabitFlowFuzzSupport
internal import HabitFlowTokens

// Access tokens (Ed25519 JWTs the gateway verifies) and OIDC ID tokens (social login), in three modes picked by the
// first byte:
//
// 0. A token as a client sends it: the rest of the input, verified by both verifiers.
// 1. A token signed by the harness: header and claims JSON from the input, signed with the verifiers' own key, so
//    the claims checks are reached (no fuzzer forges an Ed25519 signature). Whatever a verifier accepts must say
//    what it checked: our issuer, audience and key, `alg` exactly `EdDSA`, times within the leeway.
// 2. A JWK Set document (what providers publish): parsed, written and parsed back to the same keys, then used to
//    verify a token of ours.
//
// Mode 1 input: header JSON (chunk), claims JSON (chunk), then 1 byte: bit 0 corrupts the signature, bit 1 sends
// the header and claims as standard base64 rather than base64url.

private let now = Date(timeIntervalSince1970: 1_800_000_000)
private let issuer = "https://auth.habitflow.test"
private let audience = "habitflow-gateway"
private let keyID = "fuzz-key-1"
private let clientID = "habitflow-ios"
private let signingKey: Ed25519.PrivateKey = {
    guard let key = try? Ed25519.PrivateKey(rawRepresentation: Array(0..<32)) else { fatalError("no key") }
    return key
}()
private let verificationKey = VerificationKey(keyID: keyID, publicKey: signingKey.publicKey)
private let accessTokens = AccessTokenVerifier(issuer: issuer, audience: audience, keys: [verificationKey])
private let idTokens = IDTokenVerifier(providers: [
    OIDCProvider(
        name: "fuzz", issuers: [issuer], audiences: [clientID], keys: JSONWebKeySet(keys: [verificationKey.jsonWebKey]))
])

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.writeSeedsIfAsked(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    switch input.byte() % 3 {
    case 0:
        verifyBoth(String(decoding: input.rest(), as: UTF8.self), header: nil)
    case 1:
        let header = input.chunk()
        let claims = input.chunk()
        let options = input.byte()
        verifyBoth(signedToken(header: header, claims: claims, options: options), header: header)
    default:
        checkKeySet(input.rest())
    }
    return 0
}

/// `header.claims.signature` with our key's signature over the first two parts.
private func signedToken(header: [UInt8], claims: [UInt8], options: UInt8 = 0) -> String {
    let encode: ([UInt8]) -> String =
        options & 2 == 0 ? { Base64URL.encode($0) } : { Base64.encode($0) }
    let signingInput = encode(header) + "." + encode(claims)
    guard var signature = try? signingKey.signature(for: Array(signingInput.utf8)) else {
        fatalError("Ed25519 signing failed")
    }
    if options & 1 != 0 { signature[0] ^= 1 }
    return signingInput + "." + Base64URL.encode(signature)
}

private func verifyBoth(_ token: String, header: [UInt8]?) {
    if let claims = try? accessTokens.verify(token, now: now) {
        expect(claims.issuer == issuer && claims.audience == audience, "accepted another issuer or audience")
        expect(claims.keyID == keyID, "accepted a token of another key")
        expect(!claims.subject.isEmpty && !claims.sessionID.isEmpty && !claims.tokenID.isEmpty, "accepted empty claims")
        expect(claims.expiresAt.timeIntervalSince(now) > -30, "accepted an expired token")
        expect(claims.issuedAt.timeIntervalSince(now) <= 30, "accepted a token issued in the future")
        expect(algorithm(of: token) == "EdDSA", "accepted alg \(algorithm(of: token) ?? "none")")
    }
    if let claims = try? idTokens.verify(token, provider: "fuzz", now: now) {
        expect(claims.issuer == issuer && claims.audience == clientID, "accepted another issuer or audience")
        expect(!claims.subject.isEmpty, "accepted an ID token without a subject")
        expect(claims.expiresAt.timeIntervalSince(now) > -60, "accepted an expired ID token")
        expect(algorithm(of: token) == "EdDSA", "accepted alg \(algorithm(of: token) ?? "none") with an Ed25519 key")
    }
}

/// The `alg` of a token's header, read independently of the verifiers.
private func algorithm(of token: String) -> String? {
    guard let first = token.split(separator: ".", omittingEmptySubsequences: false).first,
        let bytes = Base64URL.decode(first),
        let header = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    else { return nil }
    return header["alg"] as? String
}

private func checkKeySet(_ document: [UInt8]) {
    guard let keySet = try? JSONWebKeySet(json: Data(document)) else { return }
    guard let again = try? JSONWebKeySet(json: keySet.json()) else {
        fatalError("a key set we wrote does not parse: \(String(decoding: keySet.json(), as: UTF8.self))")
    }
    expect(again == keySet, "a key set changed through json()")
    let verifier = IDTokenVerifier(providers: [
        OIDCProvider(name: "fuzz", issuers: [issuer], audiences: [clientID], keys: keySet)
    ])
    let token = signedToken(header: Array(#"{"alg":"EdDSA","kid":"\#(keyID)","typ":"JWT"}"#.utf8), claims: idClaims())
    if (try? verifier.verify(token, provider: "fuzz", now: now)) != nil {
        expect(
            keySet.key(id: keyID)?.publicKey == .ed25519(signingKey.publicKey), "a token verified with another key")
    }
}

private func idClaims(expires: Int = 1_800_000_600) -> [UInt8] {
    Array(
        (#"{"aud":"\#(clientID)","exp":\#(expires),"iat":1799999900,"iss":"\#(issuer)","sub":"1234567890","#
            + #""email":"a@b.c","email_verified":"true","nonce":"n-0S6_WzA2Mj"}"#).utf8)
}

// MARK: - Seeds

private func seeds() -> [String: [UInt8]] {
    func raw(_ token: String) -> [UInt8] { [0] + Array(token.utf8) }
    func signed(_ header: String, _ claims: String, options: UInt8 = 0) -> [UInt8] {
        var builder = FuzzInputBuilder()
        builder.byte(1)
        builder.string(header)
        builder.string(claims)
        builder.byte(options)
        return builder.bytes
    }
    func keySet(_ json: String) -> [UInt8] { [2] + Array(json.utf8) }

    let header = #"{"alg":"EdDSA","kid":"\#(keyID)","typ":"JWT"}"#
    let subject = #","sub":"6f1c2a9e-3b7d-4c8e-9a5f-1d2e3f4a5b6c""#
    let claims =
        #"{"aud":"\#(audience)","exp":1800086400,"iat":1800000000,"iss":"\#(issuer)","jti":"3q2-7w","#
        + #""sid":"0b9a5a49-5c7e-4bd4-8f0f-6b1c7a1f2e33"\#(subject)}"#
    // Made here rather than by `AccessTokenIssuer`, whose random `jti` would change the seed on every run.
    let token = signedToken(header: Array(header.utf8), claims: Array(claims.utf8))
    let ours = String(decoding: JSONWebKeySet(keys: [verificationKey.jsonWebKey]).json(), as: UTF8.self)
    return [
        "raw-valid": raw(token),
        "raw-tampered": raw(String(token.dropLast(2)) + "AA"),
        "raw-alg-none": raw(
            Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
                + "."),
        "raw-two-segments": raw("eyJhbGciOiJFZERTQSJ9.e30"),
        "signed-valid": signed(header, claims),
        "signed-id-token": signed(header, String(decoding: idClaims(), as: UTF8.self)),
        "signed-bad-signature": signed(header, claims, options: 1),
        "signed-base64-not-url": signed(header, claims, options: 2),
        "signed-hs256": signed(#"{"alg":"HS256","kid":"\#(keyID)"}"#, claims),
        "signed-crit": signed(#"{"alg":"EdDSA","kid":"\#(keyID)","crit":["exp"]}"#, claims),
        "signed-typ-at-jwt": signed(#"{"alg":"EdDSA","kid":"\#(keyID)","typ":"at+jwt"}"#, claims),
        "signed-expired": signed(header, claims.replacingOccurrences(of: "1800086400", with: "1700000000")),
        "signed-audience-array": signed(
            header, claims.replacingOccurrences(of: #""\#(audience)""#, with: #"["other","\#(audience)"]"#)),
        "signed-float-times": signed(header, claims.replacingOccurrences(of: "1800000000", with: "1.8e9")),
        "signed-no-sub": signed(header, claims.replacingOccurrences(of: subject, with: "")),
        "keyset-ours": keySet(ours),
        "keyset-rsa": keySet(
            #"{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":""#
                + "xdnC0YFwDQrKHDkfseVmCNQs_v0aZlBXgZIc25Sj_ZX2Tel2FIAwQ8UNttH8m74V2oB7jn8tQpVha7ZjUpk9eWJ2_f1pnbbYD-02"
                + "WzAc9MNnhSE9p34U9n73pymKlQW4qjlhgn-MXBiHMv1t3cSDdMEtS__LWFGn-VJB_U5oTdVrFWdg5_ojS4mcJryiBHceAHtCJvYv"
                + "h_waJARXj3OitUOOBIz64vLgS2DKvKFgo3AmzjA76hhfHsTdBN3MyhpLYi4Ub7VPnZgUvqGevRhZjVWA5mwjFs1MqiAJ87IS7RQp"
                + "w12jJL4HcD5PkcxFehLUcYtWn5XYlsW2QEKrgzKzjQ"
                + #"","e":"AQAB"}]}"#),
        "keyset-ec": keySet(
            #"{"keys":[{"kty":"EC","crv":"P-256","kid":"e1","use":"sig","alg":"ES256","#
                + #""x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","#
                + #""y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#),
        "keyset-unknown-kinds": keySet(
            #"{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"OKP","crv":"X25519","x":"AAAA"}]}"#),
    ]
}
