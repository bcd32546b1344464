internal import HabitFlowBase64
public import Foundation
public import HabitFlowCrypto

/// A public key for verifying signatures, in JSON Web Key form (RFC 7517).
///
/// The kinds we verify: `OKP`/`Ed25519` (our access tokens, RFC 8037), `RSA` (`RS256`: Google, Apple) and
/// `EC`/`P-256` (`ES256`).
public struct JSONWebKey: Sendable, Hashable {
    /// The key material; each kind allows exactly one JWS algorithm.
    public enum PublicKey: Sendable, Hashable {
        case ed25519(Ed25519.PublicKey)
        case rsa(RSA.PublicKey)
        case p256(P256.PublicKey)

        /// The only `alg` a token signed by this key may name: `EdDSA`, `RS256` or `ES256`.
        public var algorithm: String { jwsAlgorithm.rawValue }

        var jwsAlgorithm: JWSAlgorithm {
            switch self {
            case .ed25519: .edDSA
            case .rsa: .rs256
            case .p256: .es256
            }
        }

        func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
            switch self {
            case .ed25519(let key): key.isValidSignature(signature, for: message)
            case .rsa(let key): key.isValidSignature(signature, for: message)
            case .p256(let key): key.isValidSignature(signature, for: message)
            }
        }
    }

    /// `kid`: how tokens name the key. Keys without one can never be selected by a token.
    public var keyID: String?
    public var publicKey: PublicKey
    /// `use`: `"sig"`, `"enc"` or absent. A key marked `"enc"` never verifies a signature.
    public var use: String?
    /// `alg`: when present, the algorithm the key is restricted to (it must agree with the key type).
    public var algorithm: String?

    public init(keyID: String?, publicKey: PublicKey, use: String? = "sig", algorithm: String? = nil) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.use = use
        self.algorithm = algorithm ?? publicKey.algorithm
    }

    /// Checks `jws`'s algorithm against this key and the signature over its signing input.
    func verify(_ jws: CompactJWS) throws(TokenError) {
        let named = jws.algorithmName
        guard JWSAlgorithm(rawValue: named) == publicKey.jwsAlgorithm, algorithm == nil || algorithm == named else {
            throw .unsupportedAlgorithm(named)
        }
        guard publicKey.isValidSignature(jws.signature, for: jws.signingInput) else { throw .invalidSignature }
    }
}

/// A JWK Set (RFC 7517 §5): the document at a provider's `jwks_uri`, and what our auth service publishes.
///
/// Parsing skips keys of kinds we do not verify (other `kty` or curves, as §5 asks) but refuses a key of a kind we do
/// verify whose material is broken (bad base64url, wrong sizes, RSA under 2048 bits, a point off the curve) and any
/// key carrying private material: both mean the document is not what its publisher meant to serve.
public struct JSONWebKeySet: Sendable, Hashable {
    /// Larger documents are refused (Google's and Apple's are about 1-2 KiB).
    public static let maximumByteCount = 1 << 20

    public var keys: [JSONWebKey]

    public init(keys: [JSONWebKey]) {
        self.keys = keys
    }

    /// Parses a JWK Set document.
    public init(json: Data) throws(TokenError) {
        guard json.count <= Self.maximumByteCount else {
            throw .malformed("key set larger than \(Self.maximumByteCount) bytes")
        }
        let document = try JSON.decode(Document.self, from: Array(json), what: "key set")
        var keys: [JSONWebKey] = []
        for (index, entry) in document.keys.enumerated() {
            if let key = try entry.key(index: index) { keys.append(key) }
        }
        self.keys = keys
    }

    /// The key whose `kid` is `keyID` (the first, should a document repeat one).
    public func key(id keyID: String) -> JSONWebKey? {
        keys.first { $0.keyID == keyID }
    }

    public subscript(keyID: String) -> JSONWebKey? { key(id: keyID) }

    /// The set as a JWK Set document (public members only, sorted keys).
    public func json() -> Data {
        Data(JSON.encode(Document(keys: keys.map(Entry.init))))
    }

    // MARK: Wire form

    private struct Document: Codable {
        var keys: [Entry]
    }

    /// One JWK as written; every member optional so that unknown kinds decode and can be skipped.
    private struct Entry: Codable {
        var kty: String?
        var crv: String?
        var x: String?
        var y: String?
        var n: String?
        var e: String?
        var d: String?
        var kid: String?
        var use: String?
        var alg: String?

        init(_ key: JSONWebKey) {
            kid = key.keyID
            use = key.use
            alg = key.algorithm
            switch key.publicKey {
            case .ed25519(let publicKey):
                kty = "OKP"
                crv = "Ed25519"
                x = Base64URL.encode(publicKey.rawRepresentation)
            case .rsa(let publicKey):
                kty = "RSA"
                n = Base64URL.encode(publicKey.modulus)
                e = Base64URL.encode(publicKey.exponent)
            case .p256(let publicKey):
                kty = "EC"
                crv = "P-256"
                x = Base64URL.encode(publicKey.x)
                y = Base64URL.encode(publicKey.y)
            }
        }

        /// The key, `nil` for a kind we skip, or an error for broken material.
        func key(index: Int) throws(TokenError) -> JSONWebKey? {
            let name = kid.map { "key \"\($0)\"" } ?? "key #\(index)"
            guard d == nil else { throw .malformed("\(name) contains private key material") }
            let publicKey: JSONWebKey.PublicKey
            do {
                switch (kty, crv) {
                case ("OKP", "Ed25519"):
                    publicKey = .ed25519(try Ed25519.PublicKey(rawRepresentation: member(x, "x", of: name)))
                case ("RSA", _):
                    publicKey = .rsa(
                        try RSA.PublicKey(modulus: member(n, "n", of: name), exponent: member(e, "e", of: name)))
                case ("EC", "P-256"):
                    publicKey = .p256(try P256.PublicKey(x: member(x, "x", of: name), y: member(y, "y", of: name)))
                default:
                    return nil
                }
            } catch let error as CryptoError {
                throw .malformed("\(name): \(error.reason)")
            } catch let error as TokenError {
                throw error
            } catch {
                throw .malformed("\(name): \(error)")
            }
            if let alg, JWSAlgorithm(rawValue: alg) != publicKey.jwsAlgorithm {
                // A key restricted to an algorithm we do not implement (RS512, ...): skip it like an unknown kind.
                return nil
            }
            return JSONWebKey(keyID: kid, publicKey: publicKey, use: use, algorithm: alg)
        }

        private func member(_ value: String?, _ member: String, of name: String) throws(TokenError) -> [UInt8] {
            guard let value else { throw .malformed("\(name) has no \(member)") }
            guard let bytes = Base64URL.decode(value) else { throw .malformed("\(name): \(member) is not base64url") }
            return bytes
        }
    }
}
