internal import CNGHTTP2

#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif

/// The allocator of one nghttp2 session (`nghttp2_mem`), there for the one block an idle connection need not keep.
///
/// nghttp2 allocates its outbound frame buffer (16 KiB and a header) when the session is created and keeps it until the
/// session ends, though it packs every frame into it afresh and an idle connection sends nothing. Here that block gets
/// a mapping of its own, so that ``releaseFrameBufferPages()`` can give its pages back to the system while the
/// connection is quiet (touched again, they read as zeros; nghttp2 writes a frame before it reads it). It is the only
/// allocation of 16 KiB or more that nghttp2 makes while creating a session, before any peer input exists, which is
/// how it is told apart from everything else (header values the peer sent, say), which goes to malloc as usual.
final class SessionMemory {
    /// Blocks at least this large allocated while the session is created get a mapping of their own.
    static let mappedMinimumSize = 16 * 1024
    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// True only inside ``creatingSession(_:)``.
    private var creating = false
    /// The frame buffer's mapping, once nghttp2 allocated it.
    private var frameBuffer: UnsafeMutableRawBufferPointer?

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
                size < SessionMemory.mappedMinimumSize
                    ? Glibc.malloc(size) : SessionMemory.with(user) { $0.allocate(size, zeroed: false) }
            },
            free: { pointer, user in SessionMemory.with(user) { $0.free(pointer) } },
            calloc: { count, size, user in
                let (total, overflow) = count.multipliedReportingOverflow(by: size)
                if overflow { return nil }
                return total < SessionMemory.mappedMinimumSize
                    ? Glibc.calloc(1, total) : SessionMemory.with(user) { $0.allocate(total, zeroed: true) }
            },
            realloc: { pointer, size, user in SessionMemory.with(user) { $0.reallocate(pointer, size) } })
        return try body(&mem)
    }

    /// Gives the frame buffer's pages back to the system. Only while nghttp2 is not in the middle of a frame: the
    /// session's last `nghttp2_session_mem_send` returned 0. Returns the bytes released (0 without a frame buffer).
    func releaseFrameBufferPages() -> Int {
        guard let frameBuffer, let base = frameBuffer.baseAddress else { return 0 }
        return madvise(base, frameBuffer.count, MADV_DONTNEED) == 0 ? frameBuffer.count : 0
    }

    private static func with<Result>(_ user: UnsafeMutableRawPointer?, _ body: (SessionMemory) -> Result) -> Result {
        Unmanaged<SessionMemory>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    private func allocate(_ size: Int, zeroed: Bool) -> UnsafeMutableRawPointer? {
        if creating, frameBuffer == nil, size >= Self.mappedMinimumSize, let mapped = Self.map(size) {
            frameBuffer = mapped
            return mapped.baseAddress
        }
        return zeroed ? Glibc.calloc(1, size) : Glibc.malloc(size)
    }

    private func free(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        if let frameBuffer, pointer == frameBuffer.baseAddress {
            munmap(pointer, frameBuffer.count)
            self.frameBuffer = nil
        } else {
            Glibc.free(pointer)
        }
    }

    private func reallocate(_ pointer: UnsafeMutableRawPointer?, _ size: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(size, zeroed: false) }
        guard let frameBuffer, pointer == frameBuffer.baseAddress else { return Glibc.realloc(pointer, size) }
        // nghttp2 grows a frame buffer only for frames larger than the peer's default maximum; the new block is an
        // ordinary one.
        guard let moved = Glibc.malloc(size) else { return nil }
        moved.copyMemory(from: pointer, byteCount: min(size, frameBuffer.count))
        free(pointer)
        return moved
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
