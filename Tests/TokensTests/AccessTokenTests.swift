import HabitFlowBase64
import Foundation
import HabitFlowCrypto
import HabitFlowTokens
import Testing

private let issuer = "https://auth.habitflow.test"
private let audience = "habitflow-gateway"

private struct Fixture {
    let signingKey: SigningKey
    let tokenIssuer: AccessTokenIssuer
    let verifier: AccessTokenVerifier

    init(lifetime: Duration = .seconds(24 * 3600)) throws {
        signingKey = try SigningKey.generate()
        tokenIssuer = AccessTokenIssuer(signingKey: signingKey, issuer: issuer, audience: audience, lifetime: lifetime)
        verifier = AccessTokenVerifier(issuer: issuer, audience: audience, keys: [signingKey.verificationKey()])
    }

    /// A token with our header and these claims, signed with our key.
    func token(header: String? = nil, claims: [String: Any?]) throws -> String {
        try craftToken(
            header: header ?? #"{"alg":"EdDSA","kid":"\#(signingKey.keyID)","typ":"JWT"}"#, payload: claimsJSON(claims)
        ) { try signingKey.privateKey.signature(for: $0) }
    }

    static func validClaims(now: Date = referenceNow) -> [String: Any?] {
        [
            "iss": issuer, "aud": audience, "sub": "7f0c2a4e-2b8d-4c61-9f3a-5d2e8b1c6a90", "sid": "session-1",
            "jti": "token-1", "iat": seconds(now), "exp": seconds(now, 3600),
        ]
    }
}

@Suite("Access tokens: issue and verify")
struct AccessTokenTests {
    @Test("a token verifies to the claims it was issued with; header is EdDSA, JWT, kid")
    func roundTrip() throws {
        let fixture = try Fixture()
        let now = Date(timeIntervalSince1970: 1_790_000_000.75)
        let (token, claims) = try fixture.tokenIssuer.issue(subject: "user-42", sessionID: "session-7", now: now)
        #expect(claims.issuer == issuer && claims.audience == audience)
        #expect(claims.subject == "user-42" && claims.sessionID == "session-7")
        #expect(claims.issuedAt == Date(timeIntervalSince1970: 1_790_000_000))
        #expect(claims.expiresAt == Date(timeIntervalSince1970: 1_790_000_000 + 24 * 3600))
        #expect(claims.keyID == fixture.signingKey.keyID)
        #expect(try fixture.verifier.verify(token, now: now) == claims)

        let segments = token.split(separator: ".")
        #expect(segments.count == 3)
        let header =
            try JSONSerialization.jsonObject(with: Data(Base64URL.decode(segments[0]) ?? [])) as? [String: String]
        #expect(header == ["alg": "EdDSA", "typ": "JWT", "kid": fixture.signingKey.keyID])
        #expect(Base64URL.decode(segments[2])?.count == 64)

        let second = try fixture.tokenIssuer.issue(subject: "user-42", sessionID: "session-7", now: now)
        #expect(second.claims.tokenID != claims.tokenID)
    }

    @Test("expiry and not-before are checked against the given now, with the leeway")
    func expiry() throws {
        let fixture = try Fixture(lifetime: .seconds(600))
        let (token, claims) = try fixture.tokenIssuer.issue(subject: "u", sessionID: "s", now: referenceNow)
        let verify = { (offset: Double) in
            tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow + offset) }
        }
        #expect(claims.expiresAt == referenceNow + 600)
        #expect(verify(0) == nil)
        #expect(verify(599) == nil)
        #expect(verify(629) == nil)  // inside the 30 s leeway
        #expect(verify(630) == .expired)
        #expect(verify(86_400) == .expired)
        #expect(verify(-29) == nil)
        #expect(verify(-31) == .notYetValid)

        let strict = AccessTokenVerifier(
            issuer: issuer, audience: audience, keys: [fixture.signingKey.verificationKey()], leeway: .zero)
        #expect(tokenError { () throws(TokenError) in try strict.verify(token, now: referenceNow + 600) } == .expired)
        #expect(tokenError { () throws(TokenError) in try strict.verify(token, now: referenceNow - 1) } == .notYetValid)

        var claimsWithNotBefore = Fixture.validClaims()
        claimsWithNotBefore["nbf"] = seconds(referenceNow, 120)
        let notBefore = try fixture.token(claims: claimsWithNotBefore)
        #expect(
            tokenError { () throws(TokenError) in try fixture.verifier.verify(notBefore, now: referenceNow) }
                == .notYetValid)
        #expect(
            tokenError { () throws(TokenError) in try fixture.verifier.verify(notBefore, now: referenceNow + 100) }
                == nil)
    }

    @Test("wrong issuer and wrong audience are refused; aud may be an array")
    func issuerAndAudience() throws {
        let fixture = try Fixture()
        let verify = { (token: String) in
            tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow) }
        }
        var claims = Fixture.validClaims()
        #expect(verify(try fixture.token(claims: claims)) == nil)
        claims["aud"] = ["other", audience]
        #expect(verify(try fixture.token(claims: claims)) == nil)
        claims["aud"] = ["other", "another"]
        #expect(verify(try fixture.token(claims: claims)) == .wrongAudience)
        claims["aud"] = "habitflow-gateway-2"
        #expect(verify(try fixture.token(claims: claims)) == .wrongAudience)
        claims["aud"] = [String]()
        #expect(verify(try fixture.token(claims: claims)) == .wrongAudience)
        claims = Fixture.validClaims()
        claims["iss"] = "https://evil.example"
        #expect(verify(try fixture.token(claims: claims)) == .wrongIssuer)

        let otherIssuer = AccessTokenIssuer(signingKey: fixture.signingKey, issuer: "other", audience: audience)
        #expect(verify(try otherIssuer.issue(subject: "u", sessionID: "s", now: referenceNow).token) == .wrongIssuer)
        let otherAudience = AccessTokenIssuer(signingKey: fixture.signingKey, issuer: issuer, audience: "other")
        #expect(
            verify(try otherAudience.issue(subject: "u", sessionID: "s", now: referenceNow).token) == .wrongAudience)
    }

    @Test(
        "each required claim missing or empty is named",
        arguments: ["iss", "aud", "sub", "sid", "jti", "exp", "iat"])
    func missingClaims(_ name: String) throws {
        let fixture = try Fixture()
        var claims = Fixture.validClaims()
        claims[name] = nil as Any?
        let withoutClaim = try fixture.token(claims: claims)
        #expect(
            tokenError { () throws(TokenError) in try fixture.verifier.verify(withoutClaim, now: referenceNow) }
                == .missingClaim(name))
        if ["sub", "sid", "jti"].contains(name) {
            claims[name] = ""
            let emptyClaim = try fixture.token(claims: claims)
            #expect(
                tokenError { () throws(TokenError) in try fixture.verifier.verify(emptyClaim, now: referenceNow) }
                    == .missingClaim(name))
        }
    }

    @Test("alg none, HS256 keyed with the public key, RS256 and ES256 headers are refused")
    func algorithmConfusion() throws {
        let fixture = try Fixture()
        let payload = claimsJSON(Fixture.validClaims())
        let kid = fixture.signingKey.keyID
        let verify = { (token: String) in
            tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow) }
        }
        let unsigned = craftToken(header: #"{"alg":"none","kid":"\#(kid)","typ":"JWT"}"#, payload: payload) { _ in [] }
        #expect(verify(unsigned) == .unsupportedAlgorithm("none"))
        let unsignedNoKid = craftToken(header: #"{"alg":"none"}"#, payload: payload) { _ in [] }
        #expect(verify(unsignedNoKid) == .unsupportedAlgorithm("none"))

        let publicKey = fixture.signingKey.privateKey.publicKey.rawRepresentation
        let publicJWK = Array(JSONWebKeySet(keys: [fixture.signingKey.verificationKey().jsonWebKey]).json())
        for secret in [publicKey, publicJWK, Array(Base64URL.encode(publicKey).utf8)] {
            let hmac = craftToken(header: #"{"alg":"HS256","kid":"\#(kid)","typ":"JWT"}"#, payload: payload) {
                SHA256.hmac(key: secret, data: $0)
            }
            #expect(verify(hmac) == .unsupportedAlgorithm("HS256"))
        }
        for algorithm in ["RS256", "ES256", "EdDSA ", "eddsa", "ED25519"] {
            let token = try craftToken(
                header: #"{"alg":"\#(algorithm)","kid":"\#(kid)","typ":"JWT"}"#, payload: payload
            ) {
                try fixture.signingKey.privateKey.signature(for: $0)
            }
            #expect(verify(token) == .unsupportedAlgorithm(algorithm))
        }
    }

    @Test("unknown or missing kid, other typ and critical headers are refused")
    func headerChecks() throws {
        let fixture = try Fixture()
        let claims = Fixture.validClaims()
        let verify = { (token: String) in
            tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow) }
        }
        #expect(
            verify(try fixture.token(header: #"{"alg":"EdDSA","kid":"nope","typ":"JWT"}"#, claims: claims))
                == .unknownKey("nope"))
        #expect(
            verify(try fixture.token(header: #"{"alg":"EdDSA","typ":"JWT"}"#, claims: claims)) == .missingClaim("kid"))
        #expect(
            verify(try fixture.token(header: #"{"alg":"EdDSA","kid":"","typ":"JWT"}"#, claims: claims))
                == .missingClaim("kid"))
        let kid = fixture.signingKey.keyID
        #expect(verify(try fixture.token(header: #"{"alg":"EdDSA","kid":"\#(kid)"}"#, claims: claims)) == nil)
        if case .malformed = verify(
            try fixture.token(header: #"{"alg":"EdDSA","kid":"\#(kid)","typ":"at+jwt"}"#, claims: claims))
        {
        } else {
            Issue.record("typ at+jwt was accepted")
        }
        if case .malformed = verify(
            try fixture.token(header: #"{"alg":"EdDSA","kid":"\#(kid)","crit":["exp"],"exp":1}"#, claims: claims))
        {
        } else {
            Issue.record("a critical header was accepted")
        }
    }

    @Test("changing any character of any segment makes the token fail")
    func tampering() throws {
        let fixture = try Fixture()
        let (token, _) = try fixture.tokenIssuer.issue(subject: "user-42", sessionID: "session-7", now: referenceNow)
        let dots = token.indices.filter { token[$0] == "." }.map { token.distance(from: token.startIndex, to: $0) }
        var outcomes: [String: Int] = [:]
        for index in 0..<token.count where !dots.contains(index) {
            let tampered = replacingCharacter(of: token, at: index)
            let error = tokenError { () throws(TokenError) in try fixture.verifier.verify(tampered, now: referenceNow) }
            #expect(error != nil, "accepted a token changed at \(index)")
            if let error { outcomes[String(describing: error).prefix(9).description, default: 0] += 1 }
            // In the payload and the signature, every change that still decodes is a bad signature.
            if index > dots[0], case .malformed = error {
            } else if index > dots[0] {
                #expect(error == .invalidSignature)
            }
        }
        #expect(outcomes["invalid s", default: 0] > 0)
    }

    @Test(
        "malformed input of every kind is refused without crashing",
        arguments: [
            "", ".", "..", "...", "a", "a.b", "a.b.c", "a.b.c.d", "eyJhbGciOiJFZERTQSJ9.e30", "=.=.=", "e30.e30.",
            "eyJhbGciOiJFZERTQSJ9.e30=.AA", "eyJhbGciOiJFZERTQSJ9.e30.AA==", "W10.e30.AA", "bnVsbA.e30.AA",
            "eyJhbGciOjF9.e30.AA", "eyJhbGciOiIifQ.e30.AA", "eyJraWQiOiJ4In0.e30.AA", "eyJhbGciOiJFZERTQSJ9 .e30.AA",
            "eyJhbGciOiJFZERTQSJ9.e30.A\u{0}", "eyJhbGciOiJFZERTQSJ9.e30.éé",
        ])
    func malformed(_ token: String) throws {
        let fixture = try Fixture()
        guard
            case .malformed = tokenError({ () throws(TokenError) in
                try fixture.verifier.verify(token, now: referenceNow)
            })
        else {
            Issue.record("\(token) was not refused as malformed")
            return
        }
    }

    @Test("claims of the wrong JSON type, non-JSON payloads and oversized tokens are malformed")
    func malformedClaims() throws {
        let fixture = try Fixture()
        let verify = { (token: String) in
            tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow) }
        }
        func isMalformed(_ error: TokenError?) -> Bool {
            if case .malformed = error { return true }
            return false
        }
        let header = #"{"alg":"EdDSA","kid":"\#(fixture.signingKey.keyID)","typ":"JWT"}"#
        let sign = { (input: [UInt8]) throws -> [UInt8] in try fixture.signingKey.privateKey.signature(for: input) }
        for payload in ["not json", "[]", "null", "42", #"{"exp":"#, ""] {
            #expect(isMalformed(verify(try craftToken(header: header, payload: payload, sign: sign))), "\(payload)")
        }
        for (name, value) in [
            ("exp", "soon" as Any), ("iat", true), ("exp", 1e300), ("iat", -5), ("aud", 7), ("aud", [1]), ("sub", 9),
        ] {
            var claims = Fixture.validClaims()
            claims[name] = value
            #expect(isMalformed(verify(try fixture.token(claims: claims))), "\(name): \(value)")
        }
        var claims = Fixture.validClaims()
        claims["padding"] = String(repeating: "x", count: 9000)
        #expect(isMalformed(verify(try fixture.token(claims: claims))))
        #expect(isMalformed(verify(String(repeating: "A", count: 1 << 20))))
    }

    @Test(
        "header and claims must be valid JSON in full, members we do not read included, with no member name twice")
    func strictJSON() throws {
        let fixture = try Fixture()
        let kid = fixture.signingKey.keyID
        let claims = claimsJSON(Fixture.validClaims())
        // Signed with our key, so that only the JSON can be what is refused.
        let verify = { (header: [UInt8], payload: [UInt8]) -> TokenError? in
            let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
            guard let signature = try? fixture.signingKey.privateKey.signature(for: Array(input.utf8)) else {
                return .invalidSignature
            }
            let token = input + "." + Base64URL.encode(signature)
            return tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow) }
        }
        func header(_ extra: String) -> [UInt8] {
            Array(#"{"alg":"EdDSA","kid":"\#(kid)","typ":"JWT"\#(extra)}"#.utf8)
        }
        func claimsWith(_ extra: String) -> [UInt8] {
            Array((claims.dropLast() + extra + "}").utf8)
        }
        let refusedHeaders: [(String, [UInt8])] = [
            ("a raw control character in a member we ignore (found by fuzzing)", header(",\"bit\":\"at\u{01}jwt\"")),
            ("alg twice", header(#","alg":"none""#)),
            ("alg twice, once escaped", header(#","\u0061lg":"none""#)),
            ("a bad escape", header(#","x":"\q""#)),
            ("a short \\u escape", header(#","x":"\u12""#)),
            ("invalid UTF-8", header(",\"x\":\"") + [0xC3, 0x28] + Array("\"}".utf8)),
            ("an overlong UTF-8 form", header(",\"x\":\"") + [0xC0, 0xAF] + Array("\"}".utf8)),
            ("a leading zero", header(#","x":01"#)),
            ("a bare minus", header(#","x":-"#)),
            ("text after the object", header("") + Array(" {}".utf8)),
            ("a trailing comma", header(#","x":[1,]"#)),
            ("nesting 40 deep", header(#","x":"# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40))),
        ]
        for (what, bytes) in refusedHeaders {
            guard case .malformed = verify(bytes, Array(claims.utf8)) else {
                Issue.record("a header with \(what) was not refused as malformed")
                continue
            }
        }
        let refusedClaims: [(String, [UInt8])] = [
            ("sub twice", claimsWith(#","sub":"someone-else""#)),
            ("a raw tab in a claim we ignore", claimsWith(",\"note\":\"a\tb\"")),
            ("a surrogate in UTF-8 in a claim we ignore", Array((claims.dropLast() + ",\"note\":\"").utf8) + [0xED, 0xA0, 0x80] + Array("\"}".utf8)),
        ]
        for (what, bytes) in refusedClaims {
            guard case .malformed = verify(header(""), bytes) else {
                Issue.record("claims with \(what) were not refused as malformed")
                continue
            }
        }
        // Valid JSON however unusual is still accepted.
        let unusual = header(
            #","x":[{"y":null,"z":[true,false,-0.5e+3,1E2]}],"\u00e9t\u00e9":"\ud83d\ude00 \"ok\" \\/","w":"é😀""#)
        #expect(verify(unusual, Array(" \n\(claims)\t ".utf8)) == nil)
    }

    @Test("random input never crashes and is always refused")
    func randomInput() throws {
        let fixture = try Fixture()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}\"")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let length = Int.random(in: 0..<300, using: &generator)
            let token = String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "A" })
            #expect(
                tokenError { () throws(TokenError) in try fixture.verifier.verify(token, now: referenceNow) } != nil)
        }
    }

    @Test("rotation: tokens of a retired key verify until its notAfter; unknown keys never")
    func rotation() throws {
        let oldKey = try SigningKey.generate()
        let newKey = try SigningKey.generate()
        let oldIssuer = AccessTokenIssuer(
            signingKey: oldKey, issuer: issuer, audience: audience, lifetime: .seconds(3600))
        let newIssuer = AccessTokenIssuer(
            signingKey: newKey, issuer: issuer, audience: audience, lifetime: .seconds(3600))
        let rotatedAt = referenceNow
        let oldToken = try oldIssuer.issue(subject: "u", sessionID: "s", now: rotatedAt - 60)
        let newToken = try newIssuer.issue(subject: "u", sessionID: "s", now: rotatedAt + 60)
        // The old key verifies for one token lifetime after it signed its last token.
        let verifier = AccessTokenVerifier(
            issuer: issuer, audience: audience,
            keys: [newKey.verificationKey(), oldKey.verificationKey(notAfter: rotatedAt + 3600)])

        #expect(try verifier.verify(oldToken.token, now: rotatedAt + 120) == oldToken.claims)
        #expect(try verifier.verify(newToken.token, now: rotatedAt + 120) == newToken.claims)
        #expect(try verifier.verify(oldToken.token, now: rotatedAt + 3520).keyID == oldKey.keyID)
        // Past notAfter the key is gone, even for a token that would still be inside its leeway.
        let longLived = try AccessTokenIssuer(
            signingKey: oldKey, issuer: issuer, audience: audience, lifetime: .seconds(7200)
        ).issue(subject: "u", sessionID: "s", now: rotatedAt)
        #expect(
            tokenError { () throws(TokenError) in try verifier.verify(longLived.token, now: rotatedAt + 3601) }
                == .unknownKey(oldKey.keyID))
        #expect(
            tokenError { () throws(TokenError) in try verifier.verify(longLived.token, now: rotatedAt + 3599) } == nil)

        let newOnly = AccessTokenVerifier(issuer: issuer, audience: audience, keys: [newKey.verificationKey()])
        #expect(
            tokenError { () throws(TokenError) in try newOnly.verify(oldToken.token, now: rotatedAt) }
                == .unknownKey(oldKey.keyID))

        // A key under the right kid but with other material is a bad signature, not a pass.
        let impostor = AccessTokenVerifier(
            issuer: issuer, audience: audience,
            keys: [VerificationKey(keyID: oldKey.keyID, publicKey: newKey.privateKey.publicKey)])
        #expect(
            tokenError { () throws(TokenError) in try impostor.verify(oldToken.token, now: rotatedAt) }
                == .invalidSignature)
    }

    @Test("a verifier built from the key set auth publishes accepts its tokens and ignores foreign keys")
    func fromPublishedKeySet() throws {
        let current = try SigningKey.generate()
        let previous = try SigningKey.generate()
        let foreign = JSONWebKey(keyID: "ec", publicKey: .p256(try P256.PrivateKey().publicKey))
        let published = JSONWebKeySet(keys: [
            current.verificationKey().jsonWebKey, previous.verificationKey().jsonWebKey, foreign,
        ])
        let verifier = AccessTokenVerifier(
            issuer: issuer, audience: audience, keySet: try JSONWebKeySet(json: published.json()))
        #expect(Set(verifier.keys.map(\.keyID)) == [current.keyID, previous.keyID])
        for key in [current, previous] {
            let issued = try AccessTokenIssuer(signingKey: key, issuer: issuer, audience: audience)
                .issue(subject: "u", sessionID: "s", now: referenceNow)
            #expect(try verifier.verify(issued.token, now: referenceNow) == issued.claims)
        }
    }

    @Test("errors describe themselves without the token")
    func descriptions() {
        #expect(TokenError.expired.description == "token expired")
        #expect(TokenError.unknownKey("k1").description == "unknown key \"k1\"")
        #expect(TokenError.missingClaim("sub").description == "missing claim \"sub\"")
        #expect(TokenError.unsupportedAlgorithm("none").description == "unsupported algorithm \"none\"")
    }
}
