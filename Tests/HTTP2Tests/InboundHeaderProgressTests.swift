import HabitFlowHTTP2
import NIOCore
import Testing

@Suite("Following a client's preface and header blocks (slowloris)")
struct InboundHeaderProgressTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ milliseconds: Int64) -> NIODeadline { start + .milliseconds(milliseconds) }

    /// What a real client sends first: the preface and SETTINGS, then a request's HEADERS and a DATA frame.
    static func clientBytes() throws -> (preface: [UInt8], request: [UInt8]) {
        let client = try HTTP2Session(role: .client)
        var preface = ByteBuffer()
        try client.drainOutput(into: &preface)
        let streamID = try client.submitRequest(
            [
                .init(name: ":method", value: "POST"), .init(name: ":scheme", value: "http"),
                .init(name: ":path", value: "/grpc.testing.TestService/EmptyCall"),
                .init(name: ":authority", value: "localhost"),
                .init(name: "x-padding", value: String(repeating: "p", count: 200)),
            ],
            endStream: false)
        client.writeData(ByteBuffer(bytes: [0, 0, 0, 0, 0]), streamID: streamID)
        client.finishStream(streamID, trailers: nil)
        var request = ByteBuffer()
        try client.drainOutput(into: &request)
        return (Array(preface.readableBytesView), Array(request.readableBytesView))
    }

    @Test("a new connection is incomplete from its start until the preface and the first SETTINGS frame are in")
    func preface() throws {
        let (preface, _) = try Self.clientBytes()
        var progress = InboundHeaderProgress(connectionStart: Self.start)
        #expect(progress.incompleteSince == Self.start)
        progress.received(ByteBuffer(bytes: preface.prefix(30)), at: Self.at(100))
        #expect(progress.incompleteSince == Self.start, "the preface counts from the connection's start")
        progress.received(ByteBuffer(bytes: preface.dropFirst(30)), at: Self.at(200))
        #expect(progress.incompleteSince == nil)
    }

    @Test("a header block dribbled a byte at a time stays incomplete since its first byte, until its last")
    func dribbledHeaders() throws {
        let (preface, request) = try Self.clientBytes()
        var progress = InboundHeaderProgress(connectionStart: Self.start)
        progress.received(ByteBuffer(bytes: preface), at: Self.at(10))
        let headersLength = 9 + (Int(request[0]) << 16 | Int(request[1]) << 8 | Int(request[2]))
        #expect(request[3] == 0x1, "the request starts with its HEADERS frame")
        for (index, byte) in request.prefix(headersLength).enumerated() {
            progress.received(ByteBuffer(bytes: [byte]), at: Self.at(100 + Int64(index)))
            if index < headersLength - 1 {
                #expect(progress.incompleteSince == Self.at(100), "byte \(index)")
            }
        }
        #expect(progress.incompleteSince == nil)
        // The DATA frame that follows, even cut in the middle of its payload, is not a header block.
        progress.received(ByteBuffer(bytes: request.dropFirst(headersLength).prefix(11)), at: Self.at(900))
        #expect(progress.incompleteSince == nil)
    }

    @Test("a frame header cut short counts as incomplete; whole frames in one read leave nothing pending")
    func frameBoundaries() throws {
        let (preface, request) = try Self.clientBytes()
        var progress = InboundHeaderProgress(connectionStart: Self.start)
        progress.received(ByteBuffer(bytes: preface + request), at: Self.at(10))
        #expect(progress.incompleteSince == nil)
        // A PING frame header, 5 of its 9 bytes: the type could still be HEADERS as far as we know.
        let ping: [UInt8] = [0, 0, 8, 0x6, 0, 0, 0, 0, 0] + [UInt8](repeating: 1, count: 8)
        progress.received(ByteBuffer(bytes: ping.prefix(5)), at: Self.at(20))
        #expect(progress.incompleteSince == Self.at(20))
        progress.received(ByteBuffer(bytes: ping.dropFirst(5)), at: Self.at(30))
        #expect(progress.incompleteSince == nil)
    }

    @Test("a header block continued in CONTINUATION frames ends with the frame that carries END_HEADERS")
    func continuation() {
        var progress = InboundHeaderProgress(connectionStart: Self.start)
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 0x4, 0, 0, 0, 0, 0]
        progress.received(ByteBuffer(bytes: preface), at: Self.at(1))
        #expect(progress.incompleteSince == nil)
        let headers: [UInt8] = [0, 0, 3, 0x1, 0x0, 0, 0, 0, 1, 0x82, 0x86, 0x84]  // no END_HEADERS
        let continuation: [UInt8] = [0, 0, 1, 0x9, 0x0, 0, 0, 0, 1, 0x41]  // no END_HEADERS either
        let last: [UInt8] = [0, 0, 1, 0x9, 0x4, 0, 0, 0, 1, 0x41]  // END_HEADERS
        progress.received(ByteBuffer(bytes: headers), at: Self.at(2))
        #expect(progress.incompleteSince == Self.at(2))
        progress.received(ByteBuffer(bytes: continuation), at: Self.at(3))
        #expect(progress.incompleteSince == Self.at(2))
        progress.received(ByteBuffer(bytes: last), at: Self.at(4))
        #expect(progress.incompleteSince == nil)
    }
}
