public import NIOCore

/// The buffer a connection drains its session's output into, reused from one flush to the next.
///
/// Why: a connection flushes after every read batch, and a buffer allocated empty for each flush grew by doubling
/// through the flush (five or six reallocations and copies for a few calls' frames). The buffer written by one flush
/// has usually gone to the socket, and been released by the channel, when the next flush starts; its storage is then
/// cleared and reused with no allocation. When the channel still holds it (a partial write), clearing it makes fresh
/// storage instead, so bytes still queued are never touched.
public struct ReusableOutputBuffer {
    private var spare: ByteBuffer?
    private let allocator: ByteBufferAllocator
    /// Storage that grew past this (a large message) is not kept for the next flush.
    private let retainedCapacity: Int

    public init(allocator: ByteBufferAllocator, retainedCapacity: Int = 64 * 1024) {
        self.allocator = allocator
        self.retainedCapacity = retainedCapacity
    }

    /// An empty buffer for this flush: the last flush's storage when nothing else holds it any more.
    public mutating func take() -> ByteBuffer {
        guard var buffer = spare.take() else { return allocator.buffer(capacity: 4096) }
        buffer.clear()
        return buffer
    }

    /// Keeps `buffer`'s storage for the next flush; call it before handing `buffer` to the channel.
    public mutating func keep(_ buffer: ByteBuffer) {
        spare = buffer.capacity <= retainedCapacity ? buffer : nil
    }

    /// Lets the kept storage go: a connection without calls need not hold a buffer between flushes (thousands of
    /// idle connections would hold one each).
    public mutating func release() {
        spare = nil
    }
}
