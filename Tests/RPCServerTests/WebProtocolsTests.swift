import Foundation
import HabitFlowBase64
import HabitFlowHTTP2
import HabitFlowRPC
import HabitFlowRPCServer
import HabitFlowRPCWeb
import NIOCore
import SwiftProtobuf
import Testing

/// A gRPC length-prefixed message, as gRPC-Web request bodies carry them.
private func framed(_ message: some SwiftProtobuf.Message) throws -> [UInt8] {
    let payload: [UInt8] = try message.serializedBytes()
    return [0] + withUnsafeBytes(of: UInt32(payload.count).bigEndian, Array.init) + payload
}

private func withWebServer<Result: Sendable>(
    probe: Probe = Probe(), _ body: (Int) async throws -> Result
) async throws -> Result {
    try await withServer(probe: probe, configure: {
        $0.web = WebConfiguration(cors: CORSPolicy(origins: ["http://allowed.example"]))
    }) { _, port in try await body(port) }
}

private func jsonObject(_ bytes: [UInt8]) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
}

@Suite("Web protocols (gRPC-Web, Connect, CORS) over real loopback connections")
struct WebProtocolsTests {
    @Test("gRPC-Web unary over HTTP/2: the message, then grpc-status 0 in a trailer frame; interceptors ran")
    func grpcWebUnaryHTTP2() async throws {
        try await withWebServer { port in
            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(
                    path: "/test.Probe/Echo", contentType: "application/grpc-web+proto",
                    extraHeaders: [("x-user", "ana"), ("x-grpc-web", "1")])
                try await connection.sendRaw(
                    try framed(Google_Protobuf_StringValue("hi")), streamID: stream, end: true)
                let (headers, body) = try await connection.rawResponse(streamID: stream)
                let fields = Dictionary(headers.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
                #expect(fields[":status"] == "200")
                #expect(fields["content-type"] == "application/grpc-web+proto")
                #expect(fields["x-request-id"] == "req-1")
                #expect(fields["grpc-status"] == nil)  // in the body, not in HTTP trailers
                let web = try GRPCWebBody(body)
                #expect(web.messages.count == 1)
                #expect(try Google_Protobuf_StringValue(serializedBytes: web.messages[0]).value == "hi from ana")
                #expect(web.trailers["grpc-status"] == "0")
            }
        }
    }

    @Test("gRPC-Web error over HTTP/2: status, message and details in the trailer frame")
    func grpcWebErrorHTTP2() async throws {
        try await withWebServer { port in
            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(
                    path: "/test.Probe/Fail", contentType: "application/grpc-web", extraHeaders: [("x-user", "ana")])
                try await connection.sendRaw(try framed(Google_Protobuf_Empty()), streamID: stream, end: true)
                let web = try GRPCWebBody(try await connection.rawResponse(streamID: stream).body)
                #expect(web.messages.isEmpty)
                #expect(web.trailers["grpc-status"] == "3")
                #expect(web.trailers["grpc-message"] == PercentEncoding.encode("name: must not be empty ☹"))
                #expect(web.trailers["grpc-status-details-bin"] != nil)
            }
        }
    }

    @Test("gRPC-Web server streaming over HTTP/1.1 (chunked), binary and text")
    func grpcWebStreamingHTTP1() async throws {
        try await withWebServer { port in
            for text in [false, true] {
                let message = try framed(Google_Protobuf_Int64Value(3))
                let body = text ? Array(Base64.encode(message).utf8) : message
                let response = try await HTTP1TestClient.call(
                    port: port,
                    path: "/test.Probe/Flood",
                    headers: [
                        ("Content-Type", text ? "application/grpc-web-text" : "application/grpc-web+proto"),
                        ("X-User", "ana"),
                    ], body: body)
                #expect(response.status == 200)
                #expect(response.header("transfer-encoding") == "chunked")
                let bytes = try #require(
                    text ? GRPCWebTextDecoderAll(response.body) : response.body)
                let web = try GRPCWebBody(bytes)
                #expect(web.messages.count == 3)
                #expect(web.messages.allSatisfy { $0.count > 64 << 10 })
                #expect(web.trailers["grpc-status"] == "0")
            }
        }
    }

    @Test("Connect JSON unary over HTTP/1.1 and HTTP/2: 200 with the JSON message")
    func connectJSONUnary() async throws {
        try await withWebServer { port in
            let response = try await HTTP1TestClient.call(
                port: port,
                path: "/test.Probe/Echo",
                headers: [("content-type", "application/json"), ("connect-protocol-version", "1"), ("x-user", "ana")],
                body: Array(#""hello""#.utf8))
            #expect(response.status == 200)
            #expect(response.header("content-type") == "application/json")
            #expect(response.header("x-request-id") == "req-1")
            #expect(response.text == #""hello from ana""#)

            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(
                    path: "/test.Probe/Echo", contentType: "application/json", extraHeaders: [("x-user", "bo")])
                try await connection.sendRaw(Array(#""hey""#.utf8), streamID: stream, end: true)
                let (headers, body) = try await connection.rawResponse(streamID: stream)
                #expect(headers.first { $0.name == ":status" }?.value == "200")
                #expect(String(decoding: body, as: UTF8.self) == #""hey from bo""#)
            }
        }
    }

    @Test("Connect errors: a failing handler, no x-user (interceptor), unknown method, streaming method, bad JSON")
    func connectErrors() async throws {
        try await withWebServer { port in
            func call(_ path: String, user: Bool = true, body: String = "{}") async throws -> HTTP1TestResponse {
                var headers = [("content-type", "application/json")]
                if user { headers.append(("x-user", "ana")) }
                return try await HTTP1TestClient.call(port: port, path: path, headers: headers, body: Array(body.utf8))
            }
            let failed = try await call("/test.Probe/Fail")
            #expect(failed.status == 400)
            #expect(failed.header("content-type") == "application/json")
            let error = try jsonObject(failed.body)
            #expect(error["code"] as? String == "invalid_argument")
            #expect(error["message"] as? String == "name: must not be empty ☹")
            let details = try #require(error["details"] as? [[String: Any]])
            #expect(details.first?["type"] as? String == "google.rpc.BadRequest")

            let anonymous = try await call("/test.Probe/Echo", user: false, body: #""x""#)
            #expect(anonymous.status == 401)
            #expect(try jsonObject(anonymous.body)["code"] as? String == "unauthenticated")

            let unknown = try await call("/test.Probe/Nope")
            #expect(unknown.status == 501)
            #expect(try jsonObject(unknown.body)["code"] as? String == "unimplemented")

            let streaming = try await call("/test.Probe/Flood")
            #expect(streaming.status == 501)
            #expect(try jsonObject(streaming.body)["code"] as? String == "unimplemented")

            let badJSON = try await call("/test.Probe/Echo", body: "{not json")
            #expect(badJSON.status == 400)
            #expect(try jsonObject(badJSON.body)["code"] as? String == "invalid_argument")
        }
    }

    @Test("HTTP/1.1 expect: 100-continue is answered before the body (curl waits for it on large bodies)")
    func expectContinue() async throws {
        try await withWebServer { port in
            let responses = try await HTTP1TestClient.exchange(
                port: port,
                HTTP1TestClient.request(
                    path: "/test.Probe/Echo",
                    headers: [("content-type", "application/json"), ("x-user", "ana"), ("expect", "100-continue")],
                    body: Array(#""big""#.utf8)))
            #expect(responses.map(\.status) == [100, 200])
            #expect(responses.last?.text == #""big from ana""#)
        }
    }

    @Test("the handler's metadata: the call's own headers, not the protocol's, HTTP/1.1's or the browser's")
    func webMetadata() async throws {
        try await withWebServer { port in
            let response = try await HTTP1TestClient.call(
                port: port,
                path: "/test.Probe/Metadata",
                headers: [
                    ("content-type", "application/json"), ("connect-protocol-version", "1"),
                    ("connect-timeout-ms", "5000"), ("x-user", "ana"), ("X-Custom", "1"), ("cookie", "session=s"),
                    ("origin", "http://allowed.example"), ("sec-fetch-mode", "cors"), ("accept", "*/*"),
                ],
                body: Array("{}".utf8))
            #expect(response.status == 200)
            #expect(response.text == #""x-user=ana;x-custom=1""#)
        }
    }

    @Test("connect-timeout-ms: the handler is cancelled and the client gets deadline_exceeded (504)")
    func connectDeadline() async throws {
        let probe = Probe()
        try await withWebServer(probe: probe) { port in
            let started = ContinuousClock.now
            let response = try await HTTP1TestClient.call(
                port: port,
                path: "/test.Probe/Sleep",
                headers: [("content-type", "application/json"), ("x-user", "ana"), ("connect-timeout-ms", "200")],
                body: Array(#""5000""#.utf8))
            #expect(ContinuousClock.now - started < .seconds(3))
            #expect(response.status == 504)
            #expect(try jsonObject(response.body)["code"] as? String == "deadline_exceeded")
            #expect(await probe.waitFor("sleep cancelled"))
        }
    }

    @Test("CORS over HTTP/1.1: preflight and response headers for the listed origin only; keep-alive")
    func corsAndKeepAlive() async throws {
        try await withWebServer { port in
            let preflight = { (origin: String, close: Bool) in
                HTTP1TestClient.request(
                    "OPTIONS", path: "/test.Probe/Echo",
                    headers: [("origin", origin), ("access-control-request-method", "POST"),
                        ("access-control-request-headers", "content-type,x-user")], close: close)
            }
            let call = HTTP1TestClient.request(
                path: "/test.Probe/Echo",
                headers: [("content-type", "application/json"), ("x-user", "ana"), ("origin", "http://allowed.example")],
                body: Array(#""a""#.utf8), close: false)
            // Three requests on one connection: keep-alive between them.
            let responses = try await HTTP1TestClient.exchange(
                port: port, preflight("http://allowed.example", false) + call + preflight("http://evil.example", true))
            #expect(responses.count == 3)
            #expect(responses[0].status == 204)
            #expect(responses[0].header("access-control-allow-origin") == "http://allowed.example")
            #expect(responses[0].header("access-control-allow-headers")?.contains("connect-timeout-ms") == true)
            #expect(responses[0].header("vary") == "Origin")
            #expect(responses[1].status == 200)
            #expect(responses[1].header("access-control-allow-origin") == "http://allowed.example")
            #expect(responses[1].header("access-control-expose-headers")?.contains("grpc-status") == true)
            #expect(responses[2].status == 204)
            #expect(responses[2].header("access-control-allow-origin") == nil)
        }
    }

    @Test("HTTP/1.1: a request head that does not arrive whole within the header timeout closes the connection")
    func http1HeaderTimeout() async throws {
        try await withServer(probe: Probe(), configure: {
            $0.web = WebConfiguration()
            $0.connectionManagement.headerTimeout = .milliseconds(300)
        }) { _, port in
            // A first request answered in time, then a second head that never ends.
            let complete = HTTP1TestClient.request(
                path: "/test.Probe/Echo", headers: [("content-type", "application/json"), ("x-user", "ana")],
                body: Array(#""a""#.utf8), close: false)
            let started = ContinuousClock.now
            let responses = try await HTTP1TestClient.exchange(
                port: port, complete + Array("POST /test.Probe/Echo HTTP/1.1\r\nhost: x\r\n".utf8))
            #expect(responses.map(\.status) == [200])
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    @Test("web protocols off: application/grpc-web is refused 415 as before, and HTTP/1.1 is not served")
    func webOff() async throws {
        try await withServer(probe: Probe()) { _, port in
            try await TestConnection.with(port: port) { connection in
                let stream = try await connection.startCall(
                    path: "/test.Probe/Echo", contentType: "application/grpc-web", extraHeaders: [("x-user", "ana")])
                try await connection.sendRaw(try framed(Google_Protobuf_StringValue("hi")), streamID: stream, end: true)
                let response = try await connection.response(streamID: stream)
                #expect(response.field(":status") == "415")
                #expect(response.status == RPCStatusCode.internal.rawValue)
            }
            let bytes = HTTP1TestClient.request(
                path: "/test.Probe/Echo", headers: [("content-type", "application/json")], body: Array("{}".utf8))
            let responses = try? await HTTP1TestClient.exchange(port: port, bytes)
            #expect(responses?.isEmpty ?? true)
        }
    }
}

/// Decodes a whole grpc-web-text body.
private func GRPCWebTextDecoderAll(_ text: [UInt8]) -> [UInt8]? {
    var decoder = GRPCWebTextDecoder()
    return decoder.append(ByteBuffer(bytes: text))
}
