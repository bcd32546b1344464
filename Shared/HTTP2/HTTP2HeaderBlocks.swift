internal import CNGHTTP2
@preconcurrency internal import Glibc

// Header blocks: the one being received (with the strings a connection sees again and again), and the
// `nghttp2_nv` arrays of the ones we submit.

/// The header block being received, changed through one mutating call per header field: each access to a property
/// of the session (a class, called back from C) costs a dynamic exclusivity check, and a request's dozen fields made
/// three such accesses each. It also keeps the connection's recent long strings (``RecentHeaderStrings``) from one
/// block to the next.
struct IncomingHeaderBlock {
    /// 0: no block is being received (or the one being received outgrew the limit and is dropped).
    private var streamID: Int32 = 0
    private var fields: [HTTP2HeaderField] = []
    /// Its size as RFC 9113 counts it (name + value + 32 per field).
    private var listSize = 0
    private var recent = RecentHeaderStrings()

    mutating func begin(streamID: Int32) {
        self.streamID = streamID
        fields = []
        fields.reserveCapacity(12)
        listSize = 0
    }

    /// Collects one field of stream `streamID`'s block; false when the block outgrew `limit` (it is dropped).
    mutating func add(
        streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, neverIndexed: Bool, limit: Int
    ) -> Bool {
        guard self.streamID == streamID else { return true }
        listSize += name.count + value.count + 32
        guard listSize <= limit else {
            drop()
            return false
        }
        let name = recent.name(name)
        fields.append(HTTP2HeaderField(name: name, value: recent.value(value, of: name), neverIndexed: neverIndexed))
        return true
    }

    /// The fields of stream `streamID`'s complete block (none if it was dropped), leaving no block in progress.
    mutating func take(streamID: Int32) -> [HTTP2HeaderField] {
        defer { drop() }
        return self.streamID == streamID ? fields : []
    }

    /// Lets the strings kept for reuse go (a quiet connection's memory); a block in progress keeps its fields.
    mutating func forgetRecentStrings() {
        recent = RecentHeaderStrings()
    }

    private mutating func drop() {
        streamID = 0
        fields = []
        listSize = 0
    }
}

/// The long header names and values a connection received lately, so that the same bytes arriving again (a client
/// sends the same `authorization`, `user-agent` and `content-type` on every call) reuse the `String` instead of
/// allocating and validating a new one. Strings of up to 15 bytes are stored inline by Swift and skip this.
/// Bounded: a few names, and per name only its last value, so values that change on every call (a request id) only
/// ever replace their own entry.
struct RecentHeaderStrings {
    private static let maximumNames = 32
    /// Values longer than this are never kept (a large cookie-like field would pin memory for nothing).
    private static let maximumValueLength = 1024

    private var names: [String] = []
    private var lastValues: [String: String] = [:]

    mutating func name(_ bytes: UnsafeRawBufferPointer) -> String {
        guard bytes.count > 15 else { return String(decoding: bytes, as: UTF8.self) }
        if let known = names.first(where: { Self.equal($0, bytes) }) { return known }
        let name = String(decoding: bytes, as: UTF8.self)
        if names.count < Self.maximumNames { names.append(name) }
        return name
    }

    mutating func value(_ bytes: UnsafeRawBufferPointer, of name: String) -> String {
        guard bytes.count > 15, bytes.count <= Self.maximumValueLength else {
            return String(decoding: bytes, as: UTF8.self)
        }
        // One hash of the name, hit or miss: a value that changes on every call (a request id) misses every time.
        let known = lastValues.index(forKey: name)
        if let known, Self.equal(lastValues.values[known], bytes) { return lastValues.values[known] }
        let value = String(decoding: bytes, as: UTF8.self)
        if let known {
            lastValues.values[known] = value
        } else if lastValues.count < Self.maximumNames {
            lastValues[name] = value
        }
        return value
    }

    /// Whether `string`'s UTF-8 is exactly `bytes`. A value decoded from invalid UTF-8 holds replacement characters,
    /// so it never equals the bytes it came from and is made anew each time, as before.
    private static func equal(_ string: String, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var string = string
        return string.withUTF8 { utf8 in
            utf8.count == bytes.count && (utf8.count == 0 || memcmp(utf8.baseAddress!, bytes.baseAddress!, utf8.count) == 0)
        }
    }
}

/// Calls `body` with an `nghttp2_nv` array pointing into one contiguous copy of the fields (nghttp2 copies them
/// during the submit call, so the storage only has to live for the call).
func withNameValues<Result, Failure: Error>(
    _ fields: [HTTP2HeaderField],
    _ body: (UnsafePointer<nghttp2_nv>, Int) throws(Failure) -> Result
) throws(Failure) -> Result {
    // Header blocks are small: both arrays live on the stack, so submitting headers allocates nothing here.
    let byteCount = fields.reduce(1) { $0 + $1.name.utf8.count + $1.value.utf8.count }
    return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: byteCount) {
        (bytes) throws(Failure) -> Result in
        try withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(fields.count, 1)) {
            (nameValues) throws(Failure) -> Result in
            let base = bytes.baseAddress!
            var offset = 0
            for (index, field) in fields.enumerated() {
                let nameStart = offset
                offset += copyUTF8(field.name, to: base + offset)
                let valueStart = offset
                offset += copyUTF8(field.value, to: base + offset)
                (nameValues.baseAddress! + index).initialize(
                    to: nghttp2_nv(
                        name: base + nameStart, value: base + valueStart, namelen: valueStart - nameStart,
                        valuelen: offset - valueStart,
                        flags: UInt8((field.neverIndexed ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE).rawValue)))
            }
            return try body(UnsafePointer(nameValues.baseAddress!), fields.count)
        }
    }
}

/// Copies the UTF-8 bytes of `string` to `destination`, returning how many were written.
func copyUTF8(_ string: String, to destination: UnsafeMutablePointer<UInt8>) -> Int {
    if let count = string.utf8.withContiguousStorageIfAvailable({ source -> Int in
        destination.update(from: source.baseAddress!, count: source.count)
        return source.count
    }) {
        return count
    }
    var count = 0
    for byte in string.utf8 {
        destination[count] = byte
        count += 1
    }
    return count
}
