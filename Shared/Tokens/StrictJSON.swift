/// A strict RFC 8259 syntax check for JOSE headers, claims sets and key sets, run before they are decoded.
///
/// Why: `JSONDecoder` parses on demand, so members we do not read are skipped without being validated (a header
/// member holding a raw control character was accepted, found by fuzzing), and RFC 7515 §4 asks that a header with a
/// member name twice be refused rather than read one way here and another way elsewhere. It allocates only the list
/// of member names of each object (and a name's unescaped form when it has escapes).
enum StrictJSON {
    /// Deeper nesting is refused (tokens and key sets are two or three levels deep).
    static let maximumDepth = 32

    /// Why `bytes` is not one valid JSON value with unique member names, or `nil` when it is.
    static func violation(in bytes: [UInt8]) -> String? {
        var checker = Checker(bytes: bytes)
        do throws(Violation) {
            checker.skipWhitespace()
            try checker.value(depth: 0)
            checker.skipWhitespace()
            guard checker.index == bytes.count else { throw Violation("text after the value at byte \(checker.index)") }
            return nil
        } catch {
            return error.reason
        }
    }

    struct Violation: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    private struct Checker {
        let bytes: [UInt8]
        var index = 0

        private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func value(depth: Int) throws(Violation) {
            guard depth < StrictJSON.maximumDepth else { throw Violation("nested deeper than \(StrictJSON.maximumDepth)") }
            switch current ?? 0 {
            case UInt8(ascii: "{"): try object(depth: depth + 1)
            case UInt8(ascii: "["): try array(depth: depth + 1)
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw Violation("no value at byte \(index)")
            }
        }

        private mutating func object(depth: Int) throws(Violation) {
            if opensEmpty(closing: UInt8(ascii: "}")) { return }
            var names: [ArraySlice<UInt8>] = []
            var manyNames: Set<[UInt8]>?
            while true {
                guard current == UInt8(ascii: "\"") else { throw Violation("no member name at byte \(index)") }
                let name = try memberName()
                if manyNames == nil, names.count < 16 {
                    guard !names.contains(name) else { throw Violation("a member name twice") }
                    names.append(name)
                } else {
                    if manyNames == nil { manyNames = Set(names.map(Array.init)) }
                    guard manyNames!.insert(Array(name)).inserted else { throw Violation("a member name twice") }
                }
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { throw Violation("no colon at byte \(index)") }
                index += 1
                skipWhitespace()
                try value(depth: depth)
                if try containerEnds(with: UInt8(ascii: "}"), "object") { return }
            }
        }

        private mutating func array(depth: Int) throws(Violation) {
            if opensEmpty(closing: UInt8(ascii: "]")) { return }
            while true {
                try value(depth: depth)
                if try containerEnds(with: UInt8(ascii: "]"), "array") { return }
            }
        }

        /// At an object's or array's opening byte: consumes it and the whitespace after, and the closing byte too
        /// when the container is empty (then returns true).
        private mutating func opensEmpty(closing: UInt8) -> Bool {
            index += 1
            skipWhitespace()
            guard current == closing else { return false }
            index += 1
            return true
        }

        /// After a member or an element: true at the container's end (consumed), false after a comma (consumed, with
        /// the whitespace after it).
        private mutating func containerEnds(with closing: UInt8, _ container: String) throws(Violation) -> Bool {
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
                return false
            case closing:
                index += 1
                return true
            default: throw Violation("no comma or end of \(container) at byte \(index)")
            }
        }

        /// A member name as the decoder will see it: the raw bytes, or the unescaped UTF-8 when it has escapes.
        private mutating func memberName() throws(Violation) -> ArraySlice<UInt8> {
            let (range, escaped) = try string()
            guard escaped else { return bytes[range] }
            return ArraySlice(Array(unescaped(bytes[range]).utf8))
        }

        /// Checks a string; returns the range of its content and whether it has escapes.
        private mutating func string() throws(Violation) -> (Range<Int>, escaped: Bool) {
            index += 1  // "
            let start = index
            var escaped = false
            while true {
                guard let byte = current else { throw Violation("unterminated string") }
                switch byte {
                case UInt8(ascii: "\""):
                    defer { index += 1 }
                    return (start..<index, escaped)
                case UInt8(ascii: "\\"):
                    escaped = true
                    index += 1
                    switch current {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        index += 1
                        for _ in 0..<4 {
                            guard let digit = current, digit.isHexDigit else {
                                throw Violation("bad \\u escape at byte \(index)")
                            }
                            index += 1
                        }
                    default: throw Violation("bad escape at byte \(index)")
                    }
                case 0..<0x20:
                    throw Violation("control character \(byte) in a string at byte \(index)")
                case 0x80...:
                    try utf8Sequence()
                default:
                    index += 1
                }
            }
        }

        /// One multi-byte UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
        private mutating func utf8Sequence() throws(Violation) {
            let lead = bytes[index]
            let (count, low, high): (Int, UInt8, UInt8)
            switch lead {
            case 0xC2...0xDF: (count, low, high) = (1, 0x80, 0xBF)
            case 0xE0: (count, low, high) = (2, 0xA0, 0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (count, low, high) = (2, 0x80, 0xBF)
            case 0xED: (count, low, high) = (2, 0x80, 0x9F)
            case 0xF0: (count, low, high) = (3, 0x90, 0xBF)
            case 0xF1...0xF3: (count, low, high) = (3, 0x80, 0xBF)
            case 0xF4: (count, low, high) = (3, 0x80, 0x8F)
            default: throw Violation("invalid UTF-8 at byte \(index)")
            }
            for position in 1...count {
                let at = index + position
                guard at < bytes.count else { throw Violation("invalid UTF-8 at byte \(index)") }
                let range: ClosedRange<UInt8> = position == 1 ? low...high : 0x80...0xBF
                guard range.contains(bytes[at]) else { throw Violation("invalid UTF-8 at byte \(index)") }
            }
            index += count + 1
        }

        private mutating func number() throws(Violation) {
            if current == UInt8(ascii: "-") { index += 1 }
            if current == UInt8(ascii: "0") {
                index += 1
            } else {
                guard try digits() > 0 else { throw Violation("bad number at byte \(index)") }
            }
            if current == UInt8(ascii: ".") {
                index += 1
                guard try digits() > 0 else { throw Violation("bad number at byte \(index)") }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard try digits() > 0 else { throw Violation("bad number at byte \(index)") }
            }
        }

        private mutating func digits() throws(Violation) -> Int {
            let start = index
            while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
            return index - start
        }

        private mutating func literal(_ word: StaticString) throws(Violation) {
            let count = word.utf8CodeUnitCount
            let matches = word.withUTF8Buffer { expected in
                index + count <= bytes.count && bytes[index..<index + count].elementsEqual(expected)
            }
            guard matches else { throw Violation("no value at byte \(index)") }
            index += count
        }

        /// The content of a string already checked, with its escapes replaced (a lone surrogate becomes U+FFFD, as
        /// the decoder would refuse it anyway).
        private func unescaped(_ content: ArraySlice<UInt8>) -> String {
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            var position = content.startIndex
            func flushRaw() {
                scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
                raw.removeAll()
            }
            func hex(at start: Int) -> UInt32 {
                content[start..<start + 4].reduce(0) { $0 << 4 | UInt32(Character(UnicodeScalar($1)).hexDigitValue!) }
            }
            while position < content.endIndex {
                let byte = content[position]
                guard byte == UInt8(ascii: "\\") else {
                    raw.append(byte)
                    position += 1
                    continue
                }
                let kind = content[position + 1]
                guard kind == UInt8(ascii: "u") else {
                    switch kind {
                    case UInt8(ascii: "b"): raw.append(0x08)
                    case UInt8(ascii: "f"): raw.append(0x0C)
                    case UInt8(ascii: "n"): raw.append(0x0A)
                    case UInt8(ascii: "r"): raw.append(0x0D)
                    case UInt8(ascii: "t"): raw.append(0x09)
                    default: raw.append(kind)  // \" \\ \/
                    }
                    position += 2
                    continue
                }
                flushRaw()
                var code = hex(at: position + 2)
                position += 6
                if (0xD800...0xDBFF).contains(code), position + 6 <= content.endIndex,
                    content[position] == UInt8(ascii: "\\"), content[position + 1] == UInt8(ascii: "u")
                {
                    let low = hex(at: position + 2)
                    if (0xDC00...0xDFFF).contains(low) {
                        code = 0x10000 + (code - 0xD800) << 10 + (low - 0xDC00)
                        position += 6
                    }
                }
                scalars.append(UnicodeScalar(code) ?? "\u{FFFD}")
            }
            flushRaw()
            return String(scalars)
        }

    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}
