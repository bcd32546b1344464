import NIOCore
import NIOPosix

/// One HTTP/1.1 response as read off the socket (chunked bodies de-chunked).
struct HTTP1TestResponse {
    var status: Int
    /// Lower-cased names.
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A bare HTTP/1.1 client over a loopback socket: sends requests as bytes and parses the responses by hand, so the
/// tests see exactly what the server wrote (status line, chunking, keep-alive).
enum HTTP1TestClient {
    /// One request as bytes: `POST path`, the headers, a content length, the body.
    static func request(
        _ method: String = "POST", path: String, headers: [(String, String)], body: [UInt8] = [], close: Bool = true
    ) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if method != "OPTIONS" || !body.isEmpty { head += "content-length: \(body.count)\r\n" }
        if close { head += "connection: close\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    /// Sends `bytes` (one or more requests, the last with `connection: close`) and reads every response until the
    /// server closes the connection.
    static func exchange(port: Int, _ bytes: [UInt8]) async throws -> [HTTP1TestResponse] {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let received = try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: bytes))
            var all: [UInt8] = []
            for try await chunk in inbound { all += chunk.readableBytesView }
            return all
        }
        return try parse(received)
    }

    /// One POST on a connection of its own: its response.
    static func call(port: Int, path: String, headers: [(String, String)], body: [UInt8]) async throws -> HTTP1TestResponse {
        let responses = try await exchange(port: port, request(path: path, headers: headers, body: body))
        guard responses.count == 1 else { throw Malformed() }
        return responses[0]
    }

    struct Malformed: Error {}

    static func parse(_ bytes: [UInt8]) throws -> [HTTP1TestResponse] {
        var responses: [HTTP1TestResponse] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            guard let headEnd = find([13, 10, 13, 10], in: rest) else { throw Malformed() }
            let lines = String(decoding: rest[rest.startIndex..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
            rest = rest[(headEnd + 4)...]
            let statusParts = lines[0].split(separator: " ")
            guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Malformed() }
            let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (
                    line[..<colon].lowercased(),
                    String(line[line.index(after: colon)...].drop { $0 == " " })
                )
            }
            var body: [UInt8] = []
            if let length = headers.first(where: { $0.name == "content-length" }).flatMap({ Int($0.value) }) {
                body = Array(rest.prefix(length))
                rest = rest.dropFirst(length)
            } else if headers.contains(where: { $0.name == "transfer-encoding" && $0.value == "chunked" }) {
                while true {
                    guard let lineEnd = find([13, 10], in: rest),
                        let size = Int(String(decoding: rest[rest.startIndex..<lineEnd], as: UTF8.self), radix: 16)
                    else { throw Malformed() }
                    rest = rest[(lineEnd + 2)...]
                    if size == 0 {
                        rest = rest.dropFirst(2)
                        break
                    }
                    body += rest.prefix(size)
                    rest = rest.dropFirst(size + 2)
                }
            }
            responses.append(HTTP1TestResponse(status: status, headers: headers, body: body))
        }
        return responses
    }

    private static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}

/// gRPC-Web's body: the messages and the trailer frame's fields.
struct GRPCWebBody {
    var messages: [[UInt8]] = []
    var trailers: [String: String] = [:]

    init(_ bytes: [UInt8]) throws {
        var rest = bytes[...]
        while rest.count >= 5 {
            let flag = rest[rest.startIndex]
            let length = rest.dropFirst().prefix(4).reduce(0) { $0 << 8 | Int($1) }
            let payload = Array(rest.dropFirst(5).prefix(length))
            guard payload.count == length else { throw HTTP1TestClient.Malformed() }
            rest = rest.dropFirst(5 + length)
            if flag & 0x80 != 0 {
                for line in String(decoding: payload, as: UTF8.self).components(separatedBy: "\r\n") where !line.isEmpty {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    trailers[String(parts[0])] = parts.count > 1 ? String(parts[1].drop { $0 == " " }) : ""
                }
            } else {
                messages.append(payload)
            }
        }
        guard rest.isEmpty else { throw HTTP1TestClient.Malformed() }
    }
}
