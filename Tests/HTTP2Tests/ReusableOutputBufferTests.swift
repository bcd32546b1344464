import HabitFlowHTTP2
import NIOCore
import Testing

@Suite("The output buffer a connection reuses from flush to flush")
struct ReusableOutputBufferTests {
    /// The address of the buffer's storage, to tell reused storage from new.
    func storageAddress(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
        buffer.withUnsafeReadableBytes { $0.baseAddress }
    }

    @Test("a flush's bytes still held by the channel are never overwritten by the next flush")
    func bytesStillQueuedStayIntact() {
        var output = ReusableOutputBuffer(allocator: ByteBufferAllocator())
        var first = output.take()
        first.writeString("first flush")
        output.keep(first)
        let queued = first  // the channel still holds the first flush (a partial write)

        var second = output.take()
        #expect(second.readableBytes == 0)
        second.writeString("second!")
        #expect(String(buffer: queued) == "first flush")
        #expect(String(buffer: second) == "second!")
    }

    @Test("storage the channel released is used again, and storage grown past the limit is not kept")
    func releasedStorageIsReused() {
        var output = ReusableOutputBuffer(allocator: ByteBufferAllocator(), retainedCapacity: 8192)
        var first = output.take()
        first.writeString("frames")
        let address = storageAddress(first)
        output.keep(first)
        first = ByteBuffer()  // written to the socket and released

        var second = output.take()
        #expect(second.readableBytes == 0)
        second.writeString("more frames")
        #expect(storageAddress(second) == address)

        second.writeBytes([UInt8](repeating: 1, count: 10_000))
        output.keep(second)
        second = ByteBuffer()
        let third = output.take()
        #expect(third.capacity <= 8192)
    }
}
