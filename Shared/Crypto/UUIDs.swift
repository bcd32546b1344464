public import Foundation

// UUIDs on hot paths (request ids, new row ids, ids in metadata and rows), without the costs Foundation has on Linux:
// `UUID()` opens and reads /dev/urandom on every call, `uuidString` formats with `sprintf` and `UUID(uuidString:)`
// parses with `sscanf`; all three stood out in profiles of the gateway and of row decoding.

extension UUID {
    /// A random (version 4, RFC 9562) UUID from OpenSSL's generator.
    public static func random() -> UUID {
        SecureRandom.bytes(16).withUnsafeBytes { bytes in
            UUID(version4Bits: bytes.loadUnaligned(as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    /// A version 4 (RFC 9562) UUID made of 128 random bits from any generator: the version and variant bits are set
    /// over them.
    public init(version4Bits high: UInt64, _ low: UInt64) {
        var words = (high.bigEndian, low.bigEndian)
        self = withUnsafeMutableBytes(of: &words) { bytes in
            bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
            bytes[8] = bytes[8] & 0x3F | 0x80  // variant 10
            return UUID(uuid: bytes.loadUnaligned(as: uuid_t.self))
        }
    }

    /// The canonical lowercase 8-4-4-4-12 form (what Postgres prints and our APIs use).
    public var lowercasedString: String {
        withUnsafeBytes(of: uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { output in
                var index = 0
                for position in 0..<16 {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        output[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    let byte = raw[position]
                    output[index] = Hex.digits[Int(byte >> 4)]
                    output[index + 1] = Hex.digits[Int(byte & 0x0F)]
                    index += 2
                }
                return 36
            }
        }
    }

    /// Parses the canonical 8-4-4-4-12 hex form (either case) from its UTF-8 bytes; `nil` for anything else.
    @inlinable public init?(canonicalText bytes: some Collection<UInt8>) {
        guard bytes.count == 36 else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &raw) { output -> Bool in
            var iterator = bytes.makeIterator()
            for position in 0..<16 {
                if position == 4 || position == 6 || position == 8 || position == 10 {
                    guard iterator.next() == UInt8(ascii: "-") else { return false }
                }
                guard let high = iterator.next().flatMap(Hex.digitValue), let low = iterator.next().flatMap(Hex.digitValue)
                else { return false }
                output[position] = high << 4 | low
            }
            return true
        }
        guard parsed else { return nil }
        self.init(uuid: raw)
    }

    /// Parses the canonical form of `text` (see ``init(canonicalText:)``).
    public init?(canonical text: String) {
        var text = text
        guard let parsed = text.withUTF8({ UUID(canonicalText: $0) }) else { return nil }
        self = parsed
    }
}

extension UUID {
    /// 00000000-0000-0000-0000-000000000000: before every other id in Postgres's order.
    public static let min = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    /// ffffffff-ffff-ffff-ffff-ffffffffffff: after every other id.
    public static let max = UUID(
        uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))
}
