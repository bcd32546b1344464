import HabitFlowBase64
import Foundation
import HabitFlowCrypto
import HabitFlowTokens
import Testing

/// A fixed instant, so expiry tests say exactly when they are.
let referenceNow = Date(timeIntervalSince1970: 1_790_000_000)

/// A compact JWS with any header and payload (JSON text), signed by `sign` over the signing input: for tokens our
/// issuer would never make.
func craftToken(header: String, payload: String, sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
    return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
}

/// JSON text for a claims object; `nil` values are left out.
func claimsJSON(_ members: [String: Any?]) -> String {
    let present = members.compactMapValues { $0 }
    let data = try? JSONSerialization.data(withJSONObject: present, options: [.sortedKeys, .withoutEscapingSlashes])
    return String(decoding: data ?? Data(), as: UTF8.self)
}

/// Seconds since 1970 of `date` plus `offset` seconds, as JWT claims carry them.
func seconds(_ date: Date, _ offset: Int = 0) -> Int {
    Int(date.timeIntervalSince1970) + offset
}

/// The error `body` throws, which must be a ``TokenError``.
func tokenError<T>(_ body: () throws(TokenError) -> T) -> TokenError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

func tokenError<T>(_ body: () async throws(TokenError) -> T) async -> TokenError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

/// `token` with the character at `index` replaced by another base64url character.
func replacingCharacter(of token: String, at index: Int) -> String {
    var characters = Array(token)
    characters[index] = characters[index] == "A" ? "B" : "A"
    return String(characters)
}
