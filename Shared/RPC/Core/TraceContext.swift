/// A W3C Trace Context `traceparent` value (`00-<trace id>-<parent id>-<flags>`), propagated as request metadata.
public struct TraceContext: Sendable, Hashable {
    public static let headerName = "traceparent"

    /// 16 bytes as 32 lower-case hex digits.
    public var traceID: String
    /// The caller's span: 8 bytes as 16 lower-case hex digits.
    public var parentID: String
    public var sampled: Bool

    /// A new trace, for calls that do not continue one.
    public static func newRoot(sampled: Bool = true) -> TraceContext {
        TraceContext(traceID: randomHex(bytes: 16), parentID: randomHex(bytes: 8), sampled: sampled)
    }

    public init(traceID: String, parentID: String, sampled: Bool) {
        self.traceID = traceID
        self.parentID = parentID
        self.sampled = sampled
    }

    /// Parses version 00 values; `nil` for anything malformed (the caller then starts a new trace).
    public init?(traceparent: String) {
        let parts = traceparent.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff", parts[1].count == 32, parts[2].count == 16,
            parts[3].count == 2, parts.prefix(4).allSatisfy({ $0.allSatisfy(\.isHexDigit) }),
            parts[1] != String(repeating: "0", count: 32), parts[2] != String(repeating: "0", count: 16),
            let flags = UInt8(parts[3], radix: 16)
        else { return nil }
        self.init(traceID: parts[1].lowercased(), parentID: parts[2].lowercased(), sampled: flags & 1 == 1)
    }

    public var traceparent: String { "00-\(traceID)-\(parentID)-\(sampled ? "01" : "00")" }

    /// The same trace with a new span id: what an outgoing call made while serving this one carries.
    public func child() -> TraceContext {
        TraceContext(traceID: traceID, parentID: Self.randomHex(bytes: 8), sampled: sampled)
    }

    private static func randomHex(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(count * 2)
        for _ in 0..<count {
            let byte = UInt8.random(in: 0...255, using: &generator)
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: output, as: UTF8.self)
    }
}

extension Metadata {
    /// Carries `trace` as the call's `traceparent`, in place of any it had. Its span id is new on every call, so the
    /// field is sent never indexed: in HPACK's tables it would only push out fields that repeat.
    public mutating func setTraceContext(_ trace: TraceContext) {
        removeAll { $0 == TraceContext.headerName }
        add(TraceContext.headerName, trace.traceparent, neverIndexed: true)
    }
}
