internal import HabitFlowBase64
public import HabitFlowCalendar
internal import HabitFlowCrypto

/// Opaque page tokens (and change-feed cursors): a position in one list, handed to clients and taken back.
///
/// A token names the list it came from and a few fields (the position, such as the last row's sort key), plus a
/// format version and a checksum, encoded as base64url. Clients treat it as opaque; the service rejects a token
/// that was altered, truncated, made by another list or by a format it no longer reads, with a clean
/// `INVALID_ARGUMENT` (see ``RequestValidator/pageToken(_:list:fieldCount:field:)``). Tokens carry positions, never
/// secrets: the checksum catches damage and tampering, it is not a signature.
///
/// Layout before encoding: version (1 byte), list name and each field as a 2-byte big-endian length and UTF-8
/// bytes, then the first 4 bytes of the SHA-256 of everything before them.
public enum PageToken {
    /// The format this code writes and reads.
    static let version: UInt8 = 1
    /// Longer tokens are refused before they are decoded.
    public static let maximumLength = 512

    /// The token for position `fields` in the list named `list` (for example `"habits"`).
    public static func encode(list: String, _ fields: [String]) -> String {
        var bytes: [UInt8] = [version]
        for part in [list] + fields {
            let utf8 = Array(part.utf8.prefix(Int(UInt16.max)))
            bytes += [UInt8(utf8.count >> 8), UInt8(utf8.count & 0xFF)] + utf8
        }
        bytes += SHA256.hash(bytes).prefix(4)
        return Base64URL.encode(bytes)
    }

    /// The fields of a token `encode(list:_:)` made for the same list; `nil` for anything else.
    public static func decode(_ token: String, list: String) -> [String]? {
        guard token.utf8.count <= maximumLength, let bytes = Base64URL.decode(token), bytes.count >= 5,
            bytes[0] == version
        else { return nil }
        let body = bytes.dropLast(4)
        guard SHA256.hash(Array(body)).prefix(4).elementsEqual(bytes.suffix(4)) else { return nil }
        var parts: [String] = []
        var index = body.startIndex + 1
        while index < body.endIndex {
            guard body.endIndex - index >= 2 else { return nil }
            let length = Int(body[index]) << 8 | Int(body[index + 1])
            index += 2
            guard body.endIndex - index >= length else { return nil }
            guard let part = String(validating: body[index..<index + length], as: UTF8.self) else { return nil }
            parts.append(part)
            index += length
        }
        guard parts.first == list else { return nil }
        return Array(parts.dropFirst())
    }

    /// A date a token holds as its day number (`String(date.daysSinceEpoch)`): `nil` unless it is one of the dates a
    /// request may carry, years 1 to 9999 (``RequestValidator/date(year:month:day:field:)``).
    ///
    /// - Important: Read every date out of a token with this. The checksum is no signature, so a client can wrap
    ///   any number in a valid token, and `LocalDate(daysSinceEpoch:)` traps on numbers near `Int.max`.
    public static func date(_ field: String) -> LocalDate? {
        guard let days = Int(field), tokenDays.contains(days) else { return nil }
        return LocalDate(daysSinceEpoch: days)
    }

    /// 0001-01-01 to 9999-12-31 as day numbers.
    private static let tokenDays = -719_162...2_932_896
}

/// How many items a list call returns: the one rule every list follows (AIP-158).
public struct PageSizeRule: Sendable, Hashable {
    /// What a request that sets no page size (0) gets.
    public var defaultSize: Int
    /// Larger requests are served this many (not refused).
    public var maximum: Int

    public init(defaultSize: Int, maximum: Int) {
        precondition(defaultSize >= 1 && defaultSize <= maximum)
        self.defaultSize = defaultSize
        self.maximum = maximum
    }

    /// 50 by default, at most 100.
    public static let standard = PageSizeRule(defaultSize: 50, maximum: 100)
}
