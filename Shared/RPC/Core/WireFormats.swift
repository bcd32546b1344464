/// `grpc-timeout` values: up to 8 digits and a unit (`H M S m u n`).
public enum GRPCTimeout {
    /// The duration a `grpc-timeout` value stands for; `nil` when it is malformed.
    public static func parse(_ value: String) -> Duration? {
        let bytes = Array(value.utf8)
        guard (2...9).contains(bytes.count) else { return nil }
        var amount: Int64 = 0
        for digit in bytes.dropLast() {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            amount = amount * 10 + Int64(digit - UInt8(ascii: "0"))
        }
        switch bytes.last {
        case UInt8(ascii: "H"): return .seconds(amount * 3600)
        case UInt8(ascii: "M"): return .seconds(amount * 60)
        case UInt8(ascii: "S"): return .seconds(amount)
        case UInt8(ascii: "m"): return .milliseconds(amount)
        case UInt8(ascii: "u"): return .microseconds(amount)
        case UInt8(ascii: "n"): return .nanoseconds(amount)
        default: return nil
        }
    }

    /// Formats a duration with at most 8 digits, in the finest unit that fits (rounded up, so a deadline is
    /// never shortened by formatting).
    public static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, duration > .zero else { return "0n" }
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let total = nanoseconds.overflow ? Int64.max : nanoseconds.partialValue &+ (attoseconds + 999_999_999) / 1_000_000_000
        let units: [(divisor: Int64, unit: Character)] = [
            (1, "n"), (1_000, "u"), (1_000_000, "m"), (1_000_000_000, "S"), (60_000_000_000, "M"),
            (3_600_000_000_000, "H"),
        ]
        for (divisor, unit) in units {
            let value = (total + divisor - 1) / divisor
            if value < 100_000_000 { return "\(value)\(unit)" }
        }
        return "99999999H"
    }
}

/// Percent-encoding of `grpc-message` (bytes outside 0x20...0x7E and `%` itself are escaped).
public enum PercentEncoding {
    public static func encode(_ message: String) -> String {
        var output: [UInt8] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in message.utf8 {
            if byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%") {
                output.append(byte)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes what it can; a malformed escape is kept as it is (decoding never fails).
    public static func decode(_ value: String) -> String {
        let bytes = Array(value.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
