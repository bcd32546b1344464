/// Reads structured values off the front of a fuzzer's input, so one byte string drives a whole scenario.
///
/// Every read succeeds: past the end it returns zeros and empty values, so any input is a valid scenario and the
/// fuzzer never wastes executions on inputs the harness rejects. ``FuzzInputBuilder`` writes the same format (for
/// seeds).
public struct FuzzInput {
    private var bytes: ArraySlice<UInt8>

    public init(_ bytes: some Collection<UInt8>) {
        self.bytes = ArraySlice(bytes)
    }

    /// The input libFuzzer passes to `LLVMFuzzerTestOneInput`.
    public init(_ data: UnsafePointer<UInt8>?, _ count: Int) {
        self.init(UnsafeBufferPointer(start: data, count: data == nil ? 0 : count))
    }

    public var isEmpty: Bool { bytes.isEmpty }
    public var remainingCount: Int { bytes.count }

    /// One byte; 0 past the end.
    public mutating func byte() -> UInt8 {
        bytes.popFirst() ?? 0
    }

    public mutating func bool() -> Bool {
        byte() & 1 == 1
    }

    /// A 2-byte big-endian integer.
    public mutating func uint16() -> UInt16 {
        UInt16(byte()) << 8 | UInt16(byte())
    }

    /// An 8-byte big-endian integer.
    public mutating func uint64() -> UInt64 {
        (0..<8).reduce(0) { value, _ in value << 8 | UInt64(byte()) }
    }

    /// One of `choices`, picked by one byte.
    public mutating func pick<Element>(_ choices: [Element]) -> Element {
        expect(!choices.isEmpty, "nothing to pick from")
        return choices[Int(byte()) % choices.count]
    }

    /// Up to `count` bytes (fewer at the end).
    public mutating func bytes(_ count: Int) -> [UInt8] {
        let taken = bytes.prefix(max(count, 0))
        bytes.removeFirst(taken.count)
        return Array(taken)
    }

    /// A chunk: a 2-byte big-endian length, then that many bytes (fewer at the end).
    public mutating func chunk() -> [UInt8] {
        bytes(Int(uint16()))
    }

    /// A chunk as a string (invalid UTF-8 becomes U+FFFD, as a `String` made from a request's bytes would).
    public mutating func string() -> String {
        String(decoding: chunk(), as: UTF8.self)
    }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] {
        defer { bytes = [] }
        return Array(bytes)
    }
}

/// Writes input in the format ``FuzzInput`` reads: the seeds of a target are built with it.
public struct FuzzInputBuilder {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func byte(_ value: UInt8) {
        bytes.append(value)
    }

    public mutating func bool(_ value: Bool) {
        bytes.append(value ? 1 : 0)
    }

    public mutating func uint16(_ value: UInt16) {
        bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
    }

    public mutating func uint64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    public mutating func bytes(_ value: some Sequence<UInt8>) {
        bytes += value
    }

    /// A chunk; `value` must be shorter than 64 KiB.
    public mutating func chunk(_ value: some Collection<UInt8>) {
        expect(value.count <= Int(UInt16.max), "a chunk holds at most 65535 bytes")
        uint16(UInt16(value.count))
        bytes += value
    }

    public mutating func string(_ value: String) {
        chunk(Array(value.utf8))
    }

    /// The input, for `pick` reads: the index of `choice` in `choices`.
    public mutating func pick<Element: Equatable>(_ choice: Element, in choices: [Element]) {
        guard let index = choices.firstIndex(of: choice) else { fatalError("\(choice) is not a choice") }
        byte(UInt8(index))
    }
}

/// The harnesses' assertion: unlike `precondition`, it prints its message in release builds (libFuzzer shows it
/// with the reproducer).
public func expect(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError(message()) }
}
