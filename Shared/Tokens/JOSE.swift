internal import HabitFlowBase64
internal import Foundation

/// The JWS algorithms this module implements. Anything else, `none` and every `HS*` included, is refused.
enum JWSAlgorithm: String, Sendable {
    case edDSA = "EdDSA"
    case rs256 = "RS256"
    case es256 = "ES256"
}

/// The protected header of a compact JWS: only the members we act on.
///
/// Members that would make a verifier fetch or trust a key named by the token itself (`jku`, `jwk`, `x5u`, `x5c`)
/// are ignored: keys come only from the verifier's configuration.
struct JOSEHeader: Codable, Sendable {
    var alg: String?
    var kid: String?
    var typ: String?
    /// Extensions the producer says we must understand (RFC 7515 §4.1.11). We understand none.
    var crit: [String]?
}

/// A compact-serialized JWS (RFC 7515 §7.1), split and decoded but not verified.
struct CompactJWS: Sendable {
    /// Longer tokens are refused before any decoding: ours are about 400 bytes and Google's and Apple's ID tokens
    /// under 2 KiB.
    static let maximumLength = 8 * 1024

    let header: JOSEHeader
    let payload: [UInt8]
    let signature: [UInt8]
    /// `BASE64URL(header) "." BASE64URL(payload)`: the bytes the signature covers.
    let signingInput: [UInt8]

    init(parsing token: String) throws(TokenError) {
        guard token.utf8.count <= Self.maximumLength else {
            throw .malformed("longer than \(Self.maximumLength) bytes")
        }
        let segments = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else { throw .malformed("expected 3 segments, found \(segments.count)") }
        guard let headerBytes = Base64URL.decode(Substring(segments[0])) else {
            throw .malformed("header is not base64url")
        }
        guard let payload = Base64URL.decode(Substring(segments[1])) else {
            throw .malformed("payload is not base64url")
        }
        guard let signature = Base64URL.decode(Substring(segments[2])) else {
            throw .malformed("signature is not base64url")
        }
        let header = try JSON.decode(JOSEHeader.self, from: headerBytes, what: "header")
        guard let algorithm = header.alg, !algorithm.isEmpty else { throw .malformed("header has no alg") }
        if let critical = header.crit { throw .malformed("unsupported critical header parameters \(critical)") }
        self.header = header
        self.payload = payload
        self.signature = signature
        self.signingInput = Array(segments[0]) + [UInt8(ascii: ".")] + Array(segments[1])
    }

    /// The algorithm named by the header (never empty after parsing).
    var algorithmName: String { header.alg ?? "" }

    /// The header's `kid`; a token without one is refused, since every key set we verify against has several.
    func requireKeyID() throws(TokenError) -> String {
        guard let keyID = header.kid, !keyID.isEmpty else { throw .missingClaim("kid") }
        return keyID
    }

    /// `header.payload.signature` with `sign` applied to the signing input.
    static func serialize<Failure: Error>(
        header: JOSEHeader,
        payload: [UInt8],
        sign: ([UInt8]) throws(Failure) -> [UInt8]
    ) throws(Failure) -> String {
        let signingInput = Base64URL.encode(JSON.encode(header)) + "." + Base64URL.encode(payload)
        let signature = try sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// JSON coding for headers, claims and key sets: compact, sorted keys (stable output), `/` unescaped.
enum JSON {
    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding our own plain structs of strings and integers cannot fail.
        guard let data = try? encoder.encode(value) else {
            preconditionFailure("JSON encoding of \(type(of: value)) failed")
        }
        return Array(data)
    }

    static func decode<Value: Decodable>(
        _ type: Value.Type, from bytes: [UInt8], what: String
    ) throws(TokenError) -> Value {
        if let violation = StrictJSON.violation(in: bytes) { throw .malformed("\(what) is not valid JSON (\(violation))") }
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch let error as DecodingError {
            throw .malformed("\(what) is not the expected JSON (\(Self.describe(error)))")
        } catch {
            throw .malformed("\(what) is not JSON")
        }
    }

    /// A short reason without the decoder's long debug text (which can quote input).
    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? "top level" : path
        }
        switch error {
        case .typeMismatch(_, let context): return "wrong type at \(path(context))"
        case .valueNotFound(_, let context): return "null at \(path(context))"
        case .keyNotFound(let key, _): return "no \(key.stringValue)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "bad value at \(path(context))"
        @unknown default: return "undecodable"
        }
    }
}
