/// Base64 (RFC 4648): the one codec behind gRPC's `-bin` metadata, JOSE's base64url and opaque page tokens.
///
/// Two alphabets and two reading modes:
/// - ``encode(_:padding:)`` and ``decode(_:)``: the standard alphabet as gRPC uses it; decoding is lenient (padded
///   or not, and the URL-safe alphabet too, which some peers send).
/// - ``Base64URL``: the URL-safe alphabet without padding; decoding is strict, so every byte string has exactly one
///   encoding (a signed token cannot be altered without changing its bytes).
public enum Base64 {
    /// Standard base64 (RFC 4648 section 4).
    public static func encode(_ bytes: some Collection<UInt8>, padding: Bool = true) -> String {
        Codec.encode(bytes, alphabet: Codec.standardAlphabet, padding: padding)
    }

    /// Decodes padded or unpadded base64, in either alphabet; `nil` for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var input = Array(text.utf8)
        while input.last == UInt8(ascii: "=") { input.removeLast() }
        return Codec.decode(input, table: Codec.lenientTable, requireZeroTrailingBits: false)
    }
}

/// The URL-safe base64 alphabet without padding (RFC 7515 §2, RFC 4648 §5), as JOSE and page tokens use it.
///
/// Decoding is strict: only `A-Z a-z 0-9 - _`, no `=` padding, no whitespace, no length that leaves a lone
/// character, and the unused bits of the last character must be zero.
public enum Base64URL {
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Codec.encode(bytes, alphabet: Codec.urlAlphabet, padding: false)
    }

    /// The bytes `text` encodes, or `nil` when it is not strict unpadded base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Codec.decode(Array(text.utf8), table: Codec.urlTable, requireZeroTrailingBits: true)
    }
}

private enum Codec {
    static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Value of each byte in the URL-safe alphabet, 0xFF where it is none.
    static let urlTable = table(for: urlAlphabet)
    /// Both alphabets at once.
    static let lenientTable: [UInt8] = {
        var lenient = table(for: standardAlphabet)
        lenient[Int(UInt8(ascii: "-"))] = 62
        lenient[Int(UInt8(ascii: "_"))] = 63
        return lenient
    }()

    static func table(for alphabet: [UInt8]) -> [UInt8] {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }

    static func encode(_ bytes: some Collection<UInt8>, alphabet: [UInt8], padding: Bool) -> String {
        let count = bytes.count
        let length = padding ? (count + 2) / 3 * 4 : (count * 4 + 2) / 3
        return String(unsafeUninitializedCapacity: length) { output in
            var written = 0
            var iterator = bytes.makeIterator()
            while let first = iterator.next() {
                let second = iterator.next()
                let third = iterator.next()
                output[written] = alphabet[Int(first >> 2)]
                output[written + 1] = alphabet[Int((first & 0x03) << 4 | (second ?? 0) >> 4)]
                written += 2
                if let second {
                    output[written] = alphabet[Int((second & 0x0F) << 2 | (third ?? 0) >> 6)]
                    written += 1
                } else if padding {
                    output[written] = UInt8(ascii: "=")
                    written += 1
                }
                if let third {
                    output[written] = alphabet[Int(third & 0x3F)]
                    written += 1
                } else if padding {
                    output[written] = UInt8(ascii: "=")
                    written += 1
                }
            }
            return written
        }
    }

    /// Unpadded input; `requireZeroTrailingBits` refuses a last character whose unused bits are set (two texts
    /// would otherwise decode to the same bytes).
    static func decode(_ input: [UInt8], table: [UInt8], requireZeroTrailingBits: Bool) -> [UInt8]? {
        guard input.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            let value = table[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        if requireZeroTrailingBits, accumulator != 0 { return nil }
        return output
    }
}
