public import Foundation
internal import HabitFlowCompression
public import NIOCore

/// Writes a ZIP archive as a stream of chunks, one file after another, without ever holding the archive whole.
///
/// Each file is deflated (method 8) as it is written, behind a local header whose CRC-32 and sizes come after the data
/// in a data descriptor (flag bit 3), with a UTF-8 name (flag bit 11) and its modification time in UTC; ``finish()``
/// adds the central directory (made on Unix, mode `rw-r--r--`) and its end record. Only the central directory's
/// records (46 bytes plus the name per file) stay in memory until then.
///
/// It is a state machine with no I/O: calls put output into chunks of ``chunkSize`` bytes, and ``takeChunks()`` hands
/// out the full ones (after ``finish()``, the last partial one too) for the caller to send, one gRPC message each:
///
/// ```swift
/// let csv = CSVWriter(columns: ["habit_id", "day", "done"])
/// var zip = ZipStreamWriter()
/// try zip.startFile(named: "entries.csv", modified: exportTime)
/// try zip.write(csv.header)
/// for try await entry in store.entries(of: userID) {
///     try zip.write(csv.row([.text(entry.habitID), .date(entry.day), .bool(entry.done)]))
///     for chunk in zip.takeChunks() { try await responses.write(.with { $0.data = Data(chunk.readableBytesView) }) }
/// }
/// try zip.finishFile()
/// try zip.finish()
/// for chunk in zip.takeChunks() { try await responses.write(.with { $0.data = Data(chunk.readableBytesView) }) }
/// ```
///
/// Memory stays flat when the caller takes the chunks after every call: ``pendingByteCount`` is then below
/// ``chunkSize`` plus the output of the last call, which is at most 64 KiB (one deflate block) + 16 bytes for a write
/// of up to 16 KiB and for ``finishFile()`` (a write of `n` bytes more gives about `n` more), 30 bytes plus the name
/// for ``startFile(named:modified:)``, and the central directory plus 22 bytes for ``finish()``. zlib's own state,
/// about 256 KiB, comes on top, once per writer.
///
/// Without ZIP64, a file and the whole archive are at most ``maximumSize`` bytes and an archive holds at most
/// ``maximumEntryCount`` files; past them, calls throw ``ZipError`` instead (see its codes for which errors leave the
/// writer usable).
///
/// - Important: Not `Sendable` and not copyable: one owner drives it, in one task.
public struct ZipStreamWriter: ~Copyable {
    /// The largest file (before or after compression) and the largest archive without ZIP64: 4 GiB − 2 bytes, since
    /// 0xFFFFFFFF in a size or offset field means "see the ZIP64 record".
    public static let maximumSize: UInt64 = 0xFFFF_FFFE
    /// The most files an archive without ZIP64 holds (its count field is 16 bits).
    public static let maximumEntryCount = 65_535

    /// The size of the chunks ``takeChunks()`` hands out (the last one may be shorter).
    public let chunkSize: Int
    /// Bytes of archive produced so far: handed out by ``takeChunks()`` or still pending.
    public private(set) var byteCount: UInt64 = 0
    /// Bytes of archive produced and not handed out yet by ``takeChunks()``.
    public var pendingByteCount: Int { readyByteCount + partial.readableBytes }
    /// The files written whole so far.
    public var entryCount: Int { entries.count }
    /// Whether ``finish()`` has written the central directory.
    public var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    /// The limits the writer enforces; only tests lower them.
    struct Limits {
        var maximumEntrySize = ZipStreamWriter.maximumSize
        var maximumArchiveSize = ZipStreamWriter.maximumSize
        var maximumEntryCount = ZipStreamWriter.maximumEntryCount
    }

    private enum State {
        case betweenFiles
        case writingFile(ZipFormat.Entry, crc: CRC32, compressed: UInt64, uncompressed: UInt64)
        case finished
        case failed(ZipError)
    }

    private let limits: Limits
    private var state = State.betweenFiles
    private var deflater: DeflateStream
    /// The central directory's records of the files written whole, and their names.
    private var entries: [ZipFormat.Entry] = []
    private var names: Set<String> = []

    private let allocator = ByteBufferAllocator()
    /// Full chunks waiting for ``takeChunks()``, and their bytes.
    private var ready: [ByteBuffer] = []
    private var readyByteCount = 0
    /// The chunk being filled (capacity ``chunkSize``).
    private var partial: ByteBuffer
    /// Where each call's records and compressed data are built before they are copied into chunks.
    private var scratch: ByteBuffer

    /// Creates a writer that hands out chunks of `chunkSize` bytes and deflates at zlib's compression `level` (0 to
    /// 9; 6 is zlib's default balance of speed and size).
    public init(chunkSize: Int = 64 * 1024, compressionLevel: Int32 = 6) {
        self.init(chunkSize: chunkSize, compressionLevel: compressionLevel, limits: Limits())
    }

    init(chunkSize: Int, compressionLevel: Int32, limits: Limits) {
        precondition(chunkSize > 0, "a ZIP chunk size must be positive, not \(chunkSize)")
        self.chunkSize = chunkSize
        self.limits = limits
        deflater = DeflateStream(level: compressionLevel)
        partial = allocator.buffer(capacity: chunkSize)
        scratch = allocator.buffer(capacity: 16 * 1024)
    }

    // MARK: Files

    /// Starts a file: writes its local header. `name` is a relative path with `/` between folders
    /// (`export/habits.csv`); `modified` is stored in UTC, rounded down to an even second (years 1980 to 2107).
    public mutating func startFile(named name: String, modified: Date) throws(ZipError) {
        try requireBetweenFiles("start \(name)")
        try validate(name: name)
        guard entries.count < limits.maximumEntryCount else {
            throw ZipError(
                code: .tooManyEntries,
                message: "\(name) would be file \(entries.count + 1); at most \(limits.maximumEntryCount) fit")
        }
        let entry = ZipFormat.Entry(
            name: Array(name.utf8), modified: DOSDateTime(modified), localHeaderOffset: UInt32(byteCount))
        ZipFormat.writeLocalFileHeader(of: entry, into: &scratch)
        state = .writingFile(entry, crc: CRC32(), compressed: 0, uncompressed: 0)
        try emitScratch()
    }

    /// Adds `bytes` to the open file.
    public mutating func write(_ bytes: some Collection<UInt8>) throws(ZipError) {
        try add(count: bytes.count) { crc, deflater, scratch in
            crc.update(bytes)
            deflater.compress(bytes, into: &scratch)
        }
    }

    /// Adds `text` to the open file, as UTF-8.
    public mutating func write(_ text: String) throws(ZipError) {
        try write(text.utf8)
    }

    /// Adds the readable bytes of `buffer` to the open file.
    public mutating func write(_ buffer: ByteBuffer) throws(ZipError) {
        try add(count: buffer.readableBytes) { crc, deflater, scratch in
            crc.update(buffer)
            deflater.compress(buffer, into: &scratch)
        }
    }

    /// Ends the open file: the rest of its compressed data and its data descriptor.
    public mutating func finishFile() throws(ZipError) {
        guard case .writingFile(var entry, let crc, var compressed, let uncompressed) = state else {
            throw refusal(ofFileOperation: "finish a file")
        }
        let before = scratch.readableBytes
        deflater.finish(into: &scratch)
        compressed += UInt64(scratch.readableBytes - before)
        guard compressed <= limits.maximumEntrySize else {
            throw failEntryTooLarge(entry, "compresses to more than")
        }
        entry.crc32 = crc.value
        entry.compressedSize = UInt32(compressed)
        entry.uncompressedSize = UInt32(uncompressed)
        ZipFormat.writeDataDescriptor(of: entry, into: &scratch)
        entries.append(entry)
        names.insert(String(decoding: entry.name, as: UTF8.self))
        state = .betweenFiles
        try emitScratch()
    }

    /// Writes a whole file: ``startFile(named:modified:)``, ``write(_:)-(String)`` and ``finishFile()``.
    public mutating func addFile(named name: String, modified: Date, contents: String) throws(ZipError) {
        try startFile(named: name, modified: modified)
        try write(contents)
        try finishFile()
    }

    // MARK: The end

    /// Ends the archive: writes the central directory and its end record. ``takeChunks()`` then hands out the rest,
    /// the last partial chunk included.
    public mutating func finish() throws(ZipError) {
        try requireBetweenFiles("finish the archive")
        let directoryOffset = byteCount
        for entry in entries {
            ZipFormat.writeCentralDirectoryHeader(of: entry, into: &scratch)
            // The directory can be large (65,535 names): into chunks as it goes, not whole into one buffer.
            if scratch.readableBytes >= chunkSize { try emitScratch() }
        }
        try emitScratch()
        let directorySize = byteCount - directoryOffset
        ZipFormat.writeEndOfCentralDirectory(
            entryCount: UInt16(entries.count), directorySize: UInt32(directorySize),
            directoryOffset: UInt32(directoryOffset), into: &scratch)
        // The end record's offset and size are within the limit: the archive up to the end record is.
        emitScratchUnchecked()
        if partial.readableBytes > 0 {
            ready.append(partial)
            readyByteCount += partial.readableBytes
            partial = allocator.buffer(capacity: 0)
        }
        entries = []
        names = []
        state = .finished
    }

    /// Hands out the full chunks produced so far (after ``finish()``, every chunk left), oldest first, and forgets
    /// them.
    public mutating func takeChunks() -> [ByteBuffer] {
        defer {
            ready = []
            readyByteCount = 0
        }
        return ready
    }

    // MARK: Internals

    /// Checks that a file is open and may grow by `count` bytes, lets `body` checksum and compress them into
    /// `scratch`, and emits the result.
    private mutating func add(
        count: Int, _ body: (inout CRC32, inout DeflateStream, inout ByteBuffer) -> Void
    ) throws(ZipError) {
        guard case .writingFile(let entry, var crc, var compressed, var uncompressed) = state else {
            throw refusal(ofFileOperation: "write")
        }
        guard count > 0 else { return }
        uncompressed += UInt64(count)
        guard uncompressed <= limits.maximumEntrySize else {
            throw failEntryTooLarge(entry, "is larger than")
        }
        body(&crc, &deflater, &scratch)
        compressed += UInt64(scratch.readableBytes)
        state = .writingFile(entry, crc: crc, compressed: compressed, uncompressed: uncompressed)
        guard compressed <= limits.maximumEntrySize else {
            throw failEntryTooLarge(entry, "compresses to more than")
        }
        try emitScratch()
    }

    /// Moves `scratch` into chunks, failing the writer when the archive has grown past its limit.
    private mutating func emitScratch() throws(ZipError) {
        emitScratchUnchecked()
        guard byteCount <= limits.maximumArchiveSize else {
            throw fail(
                ZipError(
                    code: .archiveTooLarge, message: "the archive is larger than \(limits.maximumArchiveSize) bytes"))
        }
    }

    private mutating func emitScratchUnchecked() {
        byteCount += UInt64(scratch.readableBytes)
        while scratch.readableBytes > 0 {
            var piece = scratch.readSlice(length: min(chunkSize - partial.readableBytes, scratch.readableBytes))!
            partial.writeBuffer(&piece)
            if partial.readableBytes == chunkSize {
                ready.append(partial)
                readyByteCount += chunkSize
                partial = allocator.buffer(capacity: chunkSize)
            }
        }
        // A huge write leaves a huge scratch buffer: keep only an ordinary one for the next call.
        if scratch.capacity > 256 * 1024 {
            scratch = allocator.buffer(capacity: 16 * 1024)
        } else {
            scratch.clear()
        }
    }

    private mutating func fail(_ error: ZipError) -> ZipError {
        state = .failed(error)
        return error
    }

    private mutating func failEntryTooLarge(_ entry: ZipFormat.Entry, _ how: String) -> ZipError {
        fail(ZipError(code: .entryTooLarge, message: "\(describe(entry)) \(how) \(limits.maximumEntrySize) bytes"))
    }

    private func requireBetweenFiles(_ operation: String) throws(ZipError) {
        switch state {
        case .betweenFiles:
            return
        case .writingFile(let entry, _, _, _):
            throw ZipError(
                code: .fileStillOpen, message: "cannot \(operation): \(describe(entry)) is open; finish it first")
        case .finished, .failed:
            throw refusal(ofFileOperation: operation)
        }
    }

    /// The error for a call that needs an open file (or, when finished or failed, any call).
    private func refusal(ofFileOperation operation: String) -> ZipError {
        switch state {
        case .finished:
            ZipError(code: .finished, message: "cannot \(operation): the archive is finished")
        case .failed(let error):
            ZipError(code: .failed, message: "cannot \(operation): the archive failed", cause: error)
        case .betweenFiles, .writingFile:
            ZipError(code: .noOpenFile, message: "cannot \(operation): no file is open; call startFile first")
        }
    }

    private func validate(name: String) throws(ZipError) {
        func invalid(_ reason: String) -> ZipError {
            ZipError(code: .invalidName, message: "file name \(name.debugDescription) \(reason)")
        }
        // Judged on the bytes, as the tools that extract the archive see them: Swift compares `Character`s, and a
        // `/` or `\` followed by a combining mark or a variation selector is one `Character` that equals neither.
        let bytes = name.utf8
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        if bytes.isEmpty { throw invalid("is empty") }
        if bytes.count > Int(UInt16.max) { throw invalid("is longer than 65,535 bytes") }
        if bytes.contains(0) { throw invalid("contains NUL") }
        if bytes.contains(UInt8(ascii: "\\")) { throw invalid("contains a backslash (ZIP names separate folders with /)") }
        if bytes.first == slash { throw invalid("is absolute") }
        for component in bytes.split(separator: slash, omittingEmptySubsequences: false) {
            if component.isEmpty { throw invalid("has an empty component (a folder, or //)") }
            if component.elementsEqual([dot]) || component.elementsEqual([dot, dot]) {
                throw invalid("has a . or .. component")
            }
        }
        if names.contains(name) { throw ZipError(code: .duplicateName, message: "the archive already has \(name)") }
    }

    private func describe(_ entry: ZipFormat.Entry) -> String {
        String(decoding: entry.name, as: UTF8.self)
    }
}
