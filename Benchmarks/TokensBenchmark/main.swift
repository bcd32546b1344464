// Token costs on one core: issuing and verifying access tokens (the gateway verifies one per request), verifying
// Google- and Apple-shaped ID tokens, next to the bare signature operations underneath. Prints a table.
//
// Usage: tokens-benchmark [seconds per row, default 3]
import HabitFlowBase64
import Foundation
import HabitFlowCrypto
import HabitFlowTokens

let secondsPerRow = CommandLine.arguments.dropFirst().first.flatMap(Double.init) ?? 3

/// Runs `body` repeatedly for about `secondsPerRow` and returns operations per second.
func measure(_ body: () throws -> Void) rethrows -> Double {
    for _ in 0..<50 { try body() }  // warm-up
    let clock = ContinuousClock()
    let start = clock.now
    let deadline = start + .milliseconds(Int(secondsPerRow * 1000))
    var operations = 0
    while clock.now < deadline {
        for _ in 0..<20 { try body() }
        operations += 20
    }
    let elapsed = clock.now - start
    return Double(operations) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

func row(_ name: String, _ operationsPerSecond: Double) {
    let name = name.padding(toLength: 46, withPad: " ", startingAt: 0)
    let rate = String(format: "%10.0f", operationsPerSecond)
    let microseconds = String(format: "%8.1f", 1e6 / operationsPerSecond)
    print("\(name) \(rate) /s  \(microseconds) µs")
}

let now = Date()
let signingKey = try SigningKey.generate()
let issuer = AccessTokenIssuer(signingKey: signingKey, issuer: "https://auth.habitflow.test", audience: "gateway")
let verifier = AccessTokenVerifier(
    issuer: "https://auth.habitflow.test", audience: "gateway", keys: [signingKey.verificationKey()])
let (accessToken, _) = try issuer.issue(subject: UUID().uuidString, sessionID: UUID().uuidString, now: now)

func idToken(alg: String, kid: String, sign: ([UInt8]) throws -> [UInt8]) throws -> String {
    let header = #"{"alg":"\#(alg)","kid":"\#(kid)","typ":"JWT"}"#
    let iat = Int(now.timeIntervalSince1970)
    let payload = """
        {"iss":"https://accounts.google.com","azp":"client","aud":"client","sub":"110169484474386276334",\
        "email":"ada@example.com","email_verified":true,"at_hash":"HK6E_P6Dh8Y93mRNtsDB1Q","name":"Ada Lovelace",\
        "iat":\(iat),"exp":\(iat + 3600)}
        """
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
    return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
}

let rsaKey = try RSA.PrivateKey()
let ecKey = try P256.PrivateKey()
let rsaToken = try idToken(alg: "RS256", kid: "rsa") { try rsaKey.signature(for: $0) }
let ecToken = try idToken(alg: "ES256", kid: "ec") { try ecKey.signature(for: $0) }
let google = OIDCProvider.google(
    clientIDs: ["client"],
    keys: JSONWebKeySet(keys: [
        JSONWebKey(keyID: "rsa", publicKey: .rsa(rsaKey.publicKey)),
        JSONWebKey(keyID: "ec", publicKey: .p256(ecKey.publicKey)),
    ]))
let idVerifier = IDTokenVerifier(providers: [google])

let message = Array(accessToken.split(separator: ".").prefix(2).joined(separator: ".").utf8)
let edSignature = try signingKey.privateKey.signature(for: message)
let rsaSignature = try rsaKey.signature(for: message)
let ecSignature = try ecKey.signature(for: message)

print("access token: \(accessToken.utf8.count) bytes; \(secondsPerRow) s per row, one thread")
row("access token: issue", try measure { _ = try issuer.issue(subject: "u", sessionID: "s", now: now) })
row("access token: verify", try measure { _ = try verifier.verify(accessToken, now: now) })
let edKey = signingKey.privateKey.publicKey
row("  Ed25519 verify alone (same signing input)", measure { _ = edKey.isValidSignature(edSignature, for: message) })
row("ID token RS256 (2048): verify", try measure { _ = try idVerifier.verify(rsaToken, provider: "google", now: now) })
row("  RSA verify alone", measure { _ = rsaKey.publicKey.isValidSignature(rsaSignature, for: message) })
row("ID token ES256: verify", try measure { _ = try idVerifier.verify(ecToken, provider: "google", now: now) })
row("  P-256 verify alone", measure { _ = ecKey.publicKey.isValidSignature(ecSignature, for: message) })
