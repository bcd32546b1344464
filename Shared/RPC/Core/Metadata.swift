internal import HabitFlowBase64

/// A metadata value: printable ASCII text, or bytes under a `-bin` key.
public enum MetadataValue: Sendable, Hashable, ExpressibleByStringLiteral {
    case text(String)
    case binary([UInt8])

    public init(stringLiteral value: String) {
        self = .text(value)
    }
}

/// gRPC metadata: an ordered multimap of lower-case keys to text or binary values.
///
/// Keys ending in `-bin` carry binary values, which travel base64-encoded; all other values are printable ASCII.
public struct Metadata: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Key = String
    public typealias Value = MetadataValue
    public struct Entry: Sendable, Hashable {
        public var key: String
        public var value: Value
        /// Sent with HPACK's "never indexed" representation, as received or as asked for (see ``add(_:_:neverIndexed:)``).
        public var neverIndexed = false
    }

    private var entries: [Entry] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, MetadataValue)...) {
        for (key, value) in elements { entries.append(Entry(key: key.lowercased(), value: value)) }
    }

    /// Adds a text value (keys are lower-cased). `neverIndexed` keeps it out of HTTP/2 header compression's tables
    /// (HPACK's "never indexed", which proxies keep): for a secret, such as a credential, on a connection that also
    /// carries other callers' values, and for a value unique to one call.
    public mutating func add(_ key: String, _ value: String, neverIndexed: Bool = false) {
        entries.append(Entry(key: normalized(key), value: .text(value), neverIndexed: neverIndexed))
    }

    /// Adds a binary value; `key` must end in `-bin`.
    public mutating func add(_ key: String, binary value: [UInt8], neverIndexed: Bool = false) {
        precondition(key.hasSuffix("-bin"), "binary metadata keys end in -bin")
        entries.append(Entry(key: normalized(key), value: .binary(value), neverIndexed: neverIndexed))
    }

    public mutating func add(contentsOf other: Metadata) {
        entries.append(contentsOf: other.entries)
    }

    /// Replaces every value of `key` with one text value.
    public mutating func set(_ key: String, _ value: String, neverIndexed: Bool = false) {
        removeAll(key)
        add(key, value, neverIndexed: neverIndexed)
    }

    public mutating func removeAll(_ key: String) {
        let key = normalized(key)
        entries.removeAll { $0.key == key }
    }

    /// Removes every entry whose key `shouldRemove` picks (keys are lower-case). Metadata that has none stays as
    /// it is, without the copy a shared array makes for any in-place removal.
    public mutating func removeAll(where shouldRemove: (String) -> Bool) {
        guard entries.contains(where: { shouldRemove($0.key) }) else { return }
        entries.removeAll { shouldRemove($0.key) }
    }

    /// Makes room for `count` entries in all, so that adding them does not grow the storage step by step.
    public mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(count)
    }

    /// The first text value of `key`.
    public subscript(_ key: String) -> String? {
        let key = normalized(key)
        for entry in entries where entry.key == key {
            if case .text(let value) = entry.value { return value }
        }
        return nil
    }

    /// The first binary value of `key` (a `-bin` key).
    public func binary(_ key: String) -> [UInt8]? {
        let key = normalized(key)
        for entry in entries where entry.key == key {
            if case .binary(let value) = entry.value { return value }
        }
        return nil
    }

    public func values(_ key: String) -> [Value] {
        let key = normalized(key)
        var values: [Value] = []
        for entry in entries where entry.key == key { values.append(entry.value) }
        return values
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }

    public func makeIterator() -> IndexingIterator<[Entry]> {
        entries.makeIterator()
    }
}

/// Keys are compared lower-case; most callers already pass lower-case keys, which then cost no allocation.
private func normalized(_ key: String) -> String {
    let isUppercase = { (byte: UInt8) in byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }
    // Over the contiguous bytes when the string has them (native strings do): every metadata lookup comes here.
    let hasUppercase = key.utf8.withContiguousStorageIfAvailable { $0.contains(where: isUppercase) }
    return (hasUppercase ?? key.utf8.contains(where: isUppercase)) ? key.lowercased() : key
}

extension Metadata {
    /// Fields that describe one HTTP connection or message framing rather than the call (RFC 9110 §7.6.1 hop-by-hop
    /// fields, plus those a gRPC transport sets itself): a proxy does not pass them on.
    public static let hopByHopKeys: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "transfer-encoding", "upgrade", "host", "content-length", "content-type", "user-agent",
    ]

    /// This metadata without ``hopByHopKeys``.
    public func removingHopByHopFields() -> Metadata {
        var copy = self
        copy.removeAll { Self.hopByHopKeys.contains($0) }
        return copy
    }

    /// Header fields as sent on the wire: binary values base64-encoded without padding.
    public var headerFields: [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(entries.count)
        forEachHeaderField { name, value, _ in fields.append((name, value)) }
        return fields
    }

    /// Calls `body` with each header field as sent on the wire, without building ``headerFields`` (transports
    /// copy the fields into their own header blocks, once per call).
    public func forEachHeaderField(_ body: (_ name: String, _ value: String, _ neverIndexed: Bool) -> Void) {
        for entry in entries {
            switch entry.value {
            case .text(let text): body(entry.key, text, entry.neverIndexed)
            case .binary(let bytes): body(entry.key, Base64.encode(bytes, padding: false), entry.neverIndexed)
            }
        }
    }

    /// Parses a received header field into metadata. A `-bin` value is split at commas (intermediaries may join
    /// repeated fields) and decoded, padded or not; undecodable binary values are dropped rather than failing the call.
    /// `neverIndexed`: the field arrived with HPACK's "never indexed" representation, which a proxy passes on.
    public mutating func addReceived(name: String, value: String, neverIndexed: Bool = false) {
        guard name.hasSuffix("-bin") else {
            entries.append(Entry(key: name, value: .text(value), neverIndexed: neverIndexed))
            return
        }
        for part in value.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = part.trimmingSpaces()
            if let bytes = Base64.decode(trimmed) {
                entries.append(Entry(key: name, value: .binary(bytes), neverIndexed: neverIndexed))
            }
        }
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var result = self
        while result.first == " " { result.removeFirst() }
        while result.last == " " { result.removeLast() }
        return result
    }
}
