internal import CNGHTTP2

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The allocator of one nghttp2 session (`nghttp2_mem`), there for the two blocks an idle connection need not keep.
///
/// While creating a session, nghttp2 (1.52) allocates two blocks of a page or more and keeps them until the session
/// ends: its outbound frame buffer (16 KiB and a header), into which it packs every frame afresh though an idle
/// connection sends nothing, and its stream table (4 KiB of zeroed buckets), which holds nothing once the
/// connection's streams are closed. Here each gets a mapping of its own, so that ``releaseIdlePages(outputDrained:)``
/// can give their pages back to the system while the connection is quiet; touched again, they read as zeros. The
/// session tells when the table may have been written (``zeroedBlockMayBeWritten()``), so that the release of a
/// connection that opened no stream costs no look at it and no system call.
///
/// They are told apart from everything else (header values the peer sent, say, which go to malloc as usual) by being
/// allocated while the session is created, before any peer input exists: the frame buffer as the first block of
/// 16 KiB or more, the table as the first zeroed (calloc) block of a page or more.
final class SessionMemory {
    /// Blocks at least this large allocated (not zeroed) while the session is created: the frame buffer.
    static let frameBufferMinimumSize = 16 * 1024
    /// Zeroed blocks at least this large allocated while the session is created: tables that read as zeros when empty.
    static let zeroedMinimumSize = 4 * 1024
    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// True only inside ``creatingSession(_:)``.
    private var creating = false
    /// The frame buffer's mapping, once nghttp2 allocated it.
    private var frameBuffer: UnsafeMutableRawBufferPointer?
    /// The zeroed block's mapping (the stream table), once nghttp2 allocated it.
    private var zeroedBlock: UnsafeMutableRawBufferPointer?
    /// Whether the zeroed block may have been written since it was made or last given back: without that, it holds no
    /// page worth the look (a page nghttp2 only read maps the shared zero page), nor the system call.
    private var zeroedBlockMayHoldPages = false

    /// Calls `body` with the allocator to create the session with (nghttp2 copies the struct; the callbacks reach this
    /// object through `mem_user_data`, so it must outlive the session).
    func creatingSession<Result, Failure: Error>(
        _ body: (UnsafeMutablePointer<nghttp2_mem>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        creating = true
        defer { creating = false }
        // Every allocation of nghttp2 goes through these, so the common case stays cheap: a small block goes to malloc
        // without looking at this object, and the object is reached without retaining it (it outlives the session).
        var mem = nghttp2_mem(
            mem_user_data: Unmanaged.passUnretained(self).toOpaque(),
            malloc: { size, user in
                size < SessionMemory.frameBufferMinimumSize
                    ? Glibc.malloc(size) : SessionMemory.with(user) { $0.allocate(size, zeroed: false) }
            },
            free: { pointer, user in SessionMemory.with(user) { $0.free(pointer) } },
            calloc: { count, size, user in
                let (total, overflow) = count.multipliedReportingOverflow(by: size)
                if overflow { return nil }
                return total < SessionMemory.zeroedMinimumSize
                    ? Glibc.calloc(1, total) : SessionMemory.with(user) { $0.allocate(total, zeroed: true) }
            },
            realloc: { pointer, size, user in SessionMemory.with(user) { $0.reallocate(pointer, size) } })
        return try body(&mem)
    }

    /// Gives back the pages of the frame buffer, when `outputDrained` (the session's last `nghttp2_session_mem_send`
    /// returned 0: nghttp2 is not in the middle of a frame, and writes the next one before reading it), and of the
    /// zeroed block when it reads as zeros (as it was made: handing back zeros changes nothing). Returns the bytes
    /// given back.
    func releaseIdlePages(outputDrained: Bool) -> Int {
        var released = 0
        if outputDrained, let frameBuffer { released += Self.release(frameBuffer) }
        if zeroedBlockMayHoldPages, let zeroedBlock, Self.readsAsZeros(zeroedBlock) {
            released += Self.release(zeroedBlock)
            zeroedBlockMayHoldPages = false
        }
        return released
    }

    /// Tells that nghttp2 may have written the zeroed block since the last release (1.52 writes its stream table when
    /// a stream opens or closes, and one closes only after it opened).
    func zeroedBlockMayBeWritten() {
        zeroedBlockMayHoldPages = true
    }

    private static func with<Result>(_ user: UnsafeMutableRawPointer?, _ body: (SessionMemory) -> Result) -> Result {
        Unmanaged<SessionMemory>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    private func allocate(_ size: Int, zeroed: Bool) -> UnsafeMutableRawPointer? {
        if creating {
            // A fresh mapping reads as zeros: nothing to clear, and no page is taken before nghttp2 writes one.
            if zeroed, zeroedBlock == nil, size >= Self.zeroedMinimumSize, let mapped = Self.map(size) {
                zeroedBlock = mapped
                return mapped.baseAddress
            }
            if !zeroed, frameBuffer == nil, size >= Self.frameBufferMinimumSize, let mapped = Self.map(size) {
                frameBuffer = mapped
                return mapped.baseAddress
            }
        }
        return zeroed ? Glibc.calloc(1, size) : Glibc.malloc(size)
    }

    /// The mapping `pointer` starts, if it is one of ours.
    private func mapping(at pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawBufferPointer? {
        if let frameBuffer, frameBuffer.baseAddress == pointer { return frameBuffer }
        if let zeroedBlock, zeroedBlock.baseAddress == pointer { return zeroedBlock }
        return nil
    }

    private func free(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        guard let mapped = mapping(at: pointer) else { return Glibc.free(pointer) }
        munmap(pointer, mapped.count)
        if frameBuffer?.baseAddress == pointer { frameBuffer = nil } else { zeroedBlock = nil }
    }

    private func reallocate(_ pointer: UnsafeMutableRawPointer?, _ size: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(size, zeroed: false) }
        guard let mapped = mapping(at: pointer) else { return Glibc.realloc(pointer, size) }
        // nghttp2 grows a frame buffer only for frames larger than the peer's default maximum; the new block is an
        // ordinary one.
        guard let moved = Glibc.malloc(size) else { return nil }
        moved.copyMemory(from: pointer, byteCount: min(size, mapped.count))
        free(pointer)
        return moved
    }

    private static func release(_ mapped: UnsafeMutableRawBufferPointer) -> Int {
        madvise(mapped.baseAddress, mapped.count, MADV_DONTNEED) == 0 ? mapped.count : 0
    }

    /// Whether every byte of the mapping is zero (a page never touched reads as the shared zero page: no memory taken).
    private static func readsAsZeros(_ mapped: UnsafeMutableRawBufferPointer) -> Bool {
        let words = UnsafeRawBufferPointer(mapped)
        var offset = 0
        while offset < words.count {
            if words.load(fromByteOffset: offset, as: UInt64.self) != 0 { return false }
            offset += MemoryLayout<UInt64>.size
        }
        return true
    }

    /// An anonymous private mapping of `size` bytes rounded up to whole pages, or nil when the system refuses one.
    private static func map(_ size: Int) -> UnsafeMutableRawBufferPointer? {
        let length = (size + pageSize - 1) / pageSize * pageSize
        guard let base = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            base != UnsafeMutableRawPointer(bitPattern: -1)
        else { return nil }
        return UnsafeMutableRawBufferPointer(start: base, count: length)
    }
}
