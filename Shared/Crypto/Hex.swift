/// Lowercase hexadecimal text of bytes, and back: MACs in metadata, `bytea` and UUID text.
public enum Hex {
    @usableFromInline static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Two lowercase digits per byte.
    @inlinable public static func encode(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { output in
            var index = 0
            for byte in bytes {
                output[index] = digits[Int(byte >> 4)]
                output[index + 1] = digits[Int(byte & 0x0F)]
                index += 2
            }
            return index
        }
    }

    /// The bytes of an even number of hex digits (either case); `nil` for anything else.
    @inlinable public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count.isMultiple(of: 2) else { return nil }
        var result: [UInt8] = []
        result.reserveCapacity(text.count / 2)
        var iterator = text.makeIterator()
        while let first = iterator.next() {
            guard let high = digitValue(first), let low = iterator.next().flatMap(digitValue) else { return nil }
            result.append(high << 4 | low)
        }
        return result
    }

    /// The value of one ASCII hex digit (either case), `nil` for anything else.
    @inlinable public static func digitValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
