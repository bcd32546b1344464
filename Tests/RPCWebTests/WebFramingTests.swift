import Foundation
import HabitFlowGRPCProtos
import HabitFlowRPC
import HabitFlowRPCWeb
import NIOCore
import SwiftProtobuf
import Testing

private let allocator = ByteBufferAllocator()

@Suite("Web protocols: framing and codecs")
struct WebFramingTests {
    @Test("content types pick the protocol; native gRPC and others are not web")
    func protocolFromContentType() {
        #expect(WebProtocol(contentType: "application/grpc-web") == .grpcWeb(text: false))
        #expect(WebProtocol(contentType: "application/grpc-web+proto") == .grpcWeb(text: false))
        #expect(WebProtocol(contentType: "application/grpc-web-text") == .grpcWeb(text: true))
        #expect(WebProtocol(contentType: "application/grpc-web-text+proto") == .grpcWeb(text: true))
        #expect(WebProtocol(contentType: "application/json") == .connectUnary(json: true))
        #expect(WebProtocol(contentType: "Application/JSON; charset=utf-8") == .connectUnary(json: true))
        #expect(WebProtocol(contentType: "application/proto") == .connectUnary(json: false))
        #expect(WebProtocol(contentType: "application/connect+json") == .connectStreaming)
        #expect(WebProtocol(contentType: "application/grpc") == nil)
        #expect(WebProtocol(contentType: "application/grpc+proto") == nil)
        #expect(WebProtocol(contentType: "text/plain") == nil)
    }

    @Test("the trailer frame: flag 0x80, big-endian length, HTTP/1 header lines")
    func trailerFrameBytes() {
        let frame = GRPCWebFraming.trailerFrame(
            [(name: "grpc-status", value: "5"), (name: "Grpc-Message", value: "no such habit")], allocator: allocator)
        let block = "grpc-status: 5\r\ngrpc-message: no such habit\r\n"
        #expect(Array(frame.readableBytesView) == [0x80, 0, 0, 0, UInt8(block.utf8.count)] + Array(block.utf8))
        var body = frame
        body.moveReaderIndex(forwardBy: 5)
        let parsed = GRPCWebFraming.parseTrailerBlock(body)
        #expect(parsed.map { $0.name } == ["grpc-status", "grpc-message"])
        #expect(parsed.map { $0.value } == ["5", "no such habit"])
    }

    @Test("grpc-web-text: chunks encoded (padded) one by one decode back in any split")
    func textRoundTrip() throws {
        let chunks: [[UInt8]] = [[0, 0, 0, 0, 1, 42], [0x80, 0, 0, 0, 2, 65, 66], Array(0..<200)]
        let encoded = chunks.map {
            String(buffer: GRPCWebFraming.textEncoded(ByteBuffer(bytes: $0), allocator: allocator))
        }.joined()
        #expect(encoded.contains("="))  // padded per chunk, mid-stream
        for split in [1, 3, 4, 7, encoded.count] {
            var decoder = GRPCWebTextDecoder()
            var decoded: [UInt8] = []
            var rest = Substring(encoded)
            while !rest.isEmpty {
                let piece = rest.prefix(split)
                rest = rest.dropFirst(split)
                let chunk = decoder.append(ByteBuffer(string: String(piece)))
                decoded += try #require(chunk)
            }
            #expect(decoder.isAtBoundary)
            #expect(decoded == chunks.flatMap { $0 })
        }
        var bad = GRPCWebTextDecoder()
        #expect(bad.append(ByteBuffer(string: "!!!!")) == nil)
    }

    @Test("Connect maps every code to its HTTP status and name")
    func connectCodes() {
        let expected: [RPCStatusCode: (Int, String)] = [
            .cancelled: (499, "canceled"), .unknown: (500, "unknown"), .invalidArgument: (400, "invalid_argument"),
            .deadlineExceeded: (504, "deadline_exceeded"), .notFound: (404, "not_found"),
            .alreadyExists: (409, "already_exists"), .permissionDenied: (403, "permission_denied"),
            .resourceExhausted: (429, "resource_exhausted"), .failedPrecondition: (400, "failed_precondition"),
            .aborted: (409, "aborted"), .outOfRange: (400, "out_of_range"), .unimplemented: (501, "unimplemented"),
            .internal: (500, "internal"), .unavailable: (503, "unavailable"), .dataLoss: (500, "data_loss"),
            .unauthenticated: (401, "unauthenticated"),
        ]
        for (code, (status, name)) in expected {
            #expect(ConnectProtocol.httpStatus(code) == status, "\(code)")
            #expect(ConnectProtocol.codeName(code) == name, "\(code)")
        }
    }

    @Test("the Connect error body: code, escaped message, details as type and unpadded base64")
    func connectErrorBody() throws {
        var violation = Google_Rpc_BadRequest.FieldViolation()
        violation.field = "name"
        violation.description_p = "must not be empty"
        var badRequest = Google_Rpc_BadRequest()
        badRequest.fieldViolations = [violation]
        let detail = try Google_Protobuf_Any(message: badRequest)
        let body = ConnectProtocol.errorBody(
            code: .invalidArgument, message: "bad \"name\"\n", details: [detail], allocator: allocator)
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
        #expect(json["code"] as? String == "invalid_argument")
        #expect(json["message"] as? String == "bad \"name\"\n")
        let details = try #require(json["details"] as? [[String: Any]])
        #expect(details.count == 1)
        #expect(details[0]["type"] as? String == "google.rpc.BadRequest")
        let value = try #require(details[0]["value"] as? String)
        #expect(!value.hasSuffix("="))
        let padded = value + String(repeating: "=", count: (4 - value.count % 4) % 4)
        let decoded = try Google_Rpc_BadRequest(serializedBytes: try #require(Data(base64Encoded: padded)))
        #expect(decoded == badRequest)

        // Details received from another server (grpc-status-details-bin) are used when none are given.
        var status = Google_Rpc_Status()
        status.code = 3
        status.details = [detail]
        let relayed = ConnectProtocol.errorBody(
            code: .invalidArgument, message: "", details: [], encodedDetails: try status.serializedBytes(),
            allocator: allocator)
        #expect(String(buffer: relayed).contains("google.rpc.BadRequest"))
        #expect(!String(buffer: relayed).contains("message"))
    }

    @Test("connect-timeout-ms: up to 10 digits of milliseconds")
    func connectTimeout() {
        #expect(ConnectProtocol.parseTimeout("1500") == .milliseconds(1500))
        #expect(ConnectProtocol.parseTimeout("0") == .zero)
        #expect(ConnectProtocol.parseTimeout("9999999999") == .milliseconds(9_999_999_999))
        #expect(ConnectProtocol.parseTimeout("12345678901") == nil)
        #expect(ConnectProtocol.parseTimeout("") == nil)
        #expect(ConnectProtocol.parseTimeout("-5") == nil)
        #expect(ConnectProtocol.parseTimeout("1.5") == nil)
        #expect(ConnectProtocol.parseTimeout("10S") == nil)
    }

    @Test("CORS: listed origins get headers, others none; * allows any; the list is parsed")
    func corsDecisions() throws {
        let policy = try #require(CORSPolicy(parsing: " http://localhost:5173 , https://app.example "))
        #expect(policy.allows(origin: "http://localhost:5173"))
        #expect(!policy.allows(origin: "https://evil.example"))
        let preflight = Dictionary(uniqueKeysWithValues: policy.preflightHeaders(origin: "https://app.example"))
        #expect(preflight["access-control-allow-origin"] == "https://app.example")
        #expect(preflight["vary"] == "Origin")
        let allowed = preflight["access-control-allow-headers"] ?? ""
        for header in ["content-type", "authorization", "x-grpc-web", "connect-protocol-version", "connect-timeout-ms"] {
            #expect(allowed.contains(header))
        }
        #expect(policy.preflightHeaders(origin: "https://evil.example").isEmpty)
        #expect(policy.preflightHeaders(origin: nil).isEmpty)
        let response = Dictionary(uniqueKeysWithValues: policy.responseHeaders(origin: "http://localhost:5173"))
        #expect(response["access-control-expose-headers"]?.contains("grpc-status-details-bin") == true)
        #expect(policy.responseHeaders(origin: "https://evil.example").isEmpty)

        let any = try #require(CORSPolicy(parsing: "*"))
        #expect(any.allows(origin: "https://anything.example"))
        #expect(CORSPolicy(parsing: " , ") == nil)
    }

    @Test("Connect JSON: request transcoded to binary, response to JSON, bad JSON is INVALID_ARGUMENT")
    func jsonTranscoding() throws {
        let transcoder = JSONTranscoder(Google_Rpc_ErrorInfo.self, Google_Rpc_Status.self)
        var decoder = WebRequestDecoder(protocol: .connectUnary(json: true), maxMessageSize: 1024, transcoder: transcoder)
        #expect(try decoder.append(ByteBuffer(string: #"{"reason": "R", "#)).isEmpty)
        #expect(try decoder.append(ByteBuffer(string: #""domain": "d", "unknownField": 1}"#)).isEmpty)
        let messages = try decoder.finish()
        #expect(messages.count == 1)
        let info = try Google_Rpc_ErrorInfo(serializedBytes: Array(messages[0].payload.readableBytesView))
        #expect(info.reason == "R" && info.domain == "d")

        var bad = WebRequestDecoder(protocol: .connectUnary(json: true), maxMessageSize: 1024, transcoder: transcoder)
        _ = try bad.append(ByteBuffer(string: "{nope"))
        #expect(throws: RPCError.self) { try bad.finish() }
        do {
            _ = try bad.finish()
        } catch {
            #expect(error.code == .invalidArgument)
        }

        var tooLarge = WebRequestDecoder(protocol: .connectUnary(json: false), maxMessageSize: 4, transcoder: nil)
        #expect(throws: RPCError.self) { try tooLarge.append(ByteBuffer(string: "12345")) }

        var encoder = WebResponseEncoder(
            protocol: .connectUnary(json: true), transcoder: transcoder, extraHeaders: [], allocator: allocator)
        var status = Google_Rpc_Status()
        status.message = "hi"
        let serialized: [UInt8] = try status.serializedBytes()
        #expect(try encoder.message(ByteBuffer(bytes: serialized), initialMetadata: [:]).isEmpty)
        let parts = encoder.status(
            WebCallStatus(code: .ok, message: "", details: [], encodedDetails: nil, trailers: ["x-t": "1"],
                grpcTrailerFields: []),
            initialMetadata: ["x-h": "2"])
        guard case .head(200, let headers) = parts.first, case .body(let body) = parts[1], case .end = parts.last else {
            Issue.record("unexpected parts \(parts)")
            return
        }
        let fields = Dictionary(uniqueKeysWithValues: headers)
        #expect(fields["content-type"] == "application/json")
        #expect(fields["x-h"] == "2")
        #expect(fields["trailer-x-t"] == "1")
        #expect(fields["content-length"] == String(body.readableBytes))
        #expect(String(buffer: body) == #"{"message":"hi"}"#)
    }

    @Test("gRPC-Web response: head, length-prefixed messages, the status in a trailer frame; text is base64")
    func grpcWebResponse() throws {
        for text in [false, true] {
            var encoder = WebResponseEncoder(
                protocol: .grpcWeb(text: text), transcoder: nil, extraHeaders: [("vary", "Origin")], allocator: allocator)
            var parts = try encoder.message(ByteBuffer(bytes: [7, 8]), initialMetadata: [:])
            parts += try encoder.message(ByteBuffer(bytes: [9]), initialMetadata: [:])
            parts += encoder.status(
                WebCallStatus(
                    code: .notFound, message: "gone", details: [], encodedDetails: nil, trailers: [:],
                    grpcTrailerFields: [("grpc-status", "5"), ("grpc-message", "gone")]),
                initialMetadata: [:])
            guard case .head(200, let headers) = parts.first else {
                Issue.record("no head first")
                continue
            }
            #expect(Dictionary(uniqueKeysWithValues: headers)["content-type"] == (text ? "application/grpc-web-text+proto" : "application/grpc-web+proto"))
            var body: [UInt8] = []
            var textDecoder = GRPCWebTextDecoder()
            for case .body(let chunk) in parts {
                let decoded = text ? textDecoder.append(chunk) : Array(chunk.readableBytesView)
                body += try #require(decoded)
            }
            let trailerBlock = "grpc-status: 5\r\ngrpc-message: gone\r\n"
            #expect(body == [0, 0, 0, 0, 2, 7, 8, 0, 0, 0, 0, 1, 9, 0x80, 0, 0, 0, UInt8(trailerBlock.utf8.count)] + Array(trailerBlock.utf8))
            if case .end = parts.last {} else { Issue.record("no end last") }
        }
    }
}
