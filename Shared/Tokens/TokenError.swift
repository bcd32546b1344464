/// Why a token (or a key set) was refused. The description is safe to log; it never contains the token.
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input is not a well-formed compact JWS, its header or claims are not the JSON we expect, or a key set
    /// is not a well-formed JWK Set. The reason names what was wrong.
    case malformed(String)
    /// The header's `alg` is not one we accept for this kind of token or this key (`none`, `HS256`, a mismatch).
    case unsupportedAlgorithm(String)
    /// No usable key has this `kid` (never known, retired past its `notAfter`, or meant for encryption).
    case unknownKey(String)
    case invalidSignature
    /// `exp` has passed (beyond the leeway).
    case expired
    /// `iat` or `nbf` is in the future (beyond the leeway).
    case notYetValid
    case wrongIssuer
    case wrongAudience
    /// A claim (or the header's `kid`) the token must carry is absent or empty.
    case missingClaim(String)
    /// ``IDTokenVerifier`` has no provider with this name.
    case unknownProvider(String)
    /// A key set could not be loaded (file unreadable, HTTP failure, timeout, too large).
    case keySetUnavailable(String)

    public var description: String {
        switch self {
        case .malformed(let reason): "malformed token: \(reason)"
        case .unsupportedAlgorithm(let algorithm): "unsupported algorithm \"\(algorithm)\""
        case .unknownKey(let keyID): "unknown key \"\(keyID)\""
        case .invalidSignature: "invalid signature"
        case .expired: "token expired"
        case .notYetValid: "token not yet valid"
        case .wrongIssuer: "wrong issuer"
        case .wrongAudience: "wrong audience"
        case .missingClaim(let name): "missing claim \"\(name)\""
        case .unknownProvider(let name): "unknown identity provider \"\(name)\""
        case .keySetUnavailable(let reason): "key set unavailable: \(reason)"
        }
    }
}
