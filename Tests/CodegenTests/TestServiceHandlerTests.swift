internal import Foundation
internal import GRPCInteropTesting
internal import HabitFlowRPC
internal import NIOCore
internal import SwiftProtobuf
internal import Testing

/// The routing protoc-gen-habitflow generates for grpc.testing.TestService (Tools/Interop/Testing/Generated).
@Suite struct TestServiceHandlerTests {
    @Test func methodsListEveryRPCWithItsKind() {
        let routes = EchoingTestService().methods.map { Route(path: $0.descriptor.path, kind: $0.kind) }

        #expect(
            routes == [
                Route(path: "/grpc.testing.TestService/EmptyCall", kind: .unary),
                Route(path: "/grpc.testing.TestService/UnaryCall", kind: .unary),
                Route(path: "/grpc.testing.TestService/CacheableUnaryCall", kind: .unary),
                Route(path: "/grpc.testing.TestService/StreamingOutputCall", kind: .serverStreaming),
                Route(path: "/grpc.testing.TestService/StreamingInputCall", kind: .clientStreaming),
                Route(path: "/grpc.testing.TestService/FullDuplexCall", kind: .bidirectionalStreaming),
                Route(path: "/grpc.testing.TestService/HalfDuplexCall", kind: .bidirectionalStreaming),
                Route(path: "/grpc.testing.TestService/UnimplementedCall", kind: .unary),
            ])
        #expect(EchoingTestService().methods.map(\.descriptor) == Grpc_Testing_TestService.Method.all)
        #expect(EchoingTestService().serviceName == "grpc.testing.TestService")
    }

    @Test func unaryMethodDecodesTheRequestCallsTheHandlerAndSendsTheResponse() async throws {
        var request = Grpc_Testing_SimpleRequest()
        request.responseSize = 5
        request.fillUsername = true
        let transport = FakeCallTransport(requests: [ByteBuffer(bytes: try request.serializedBytes() as [UInt8])])

        try await unaryCallMethod().run(makeContext(for: Grpc_Testing_TestService.Method.unaryCall), transport)

        let sent = await transport.sentResponses
        try #require(sent.count == 1)
        let response = try Grpc_Testing_SimpleResponse(serializedBytes: Array(sent[0].readableBytesView))
        #expect(response.payload.body == Data(count: 5))
        #expect(response.username == "echo")
    }

    @Test func malformedRequestPayloadFailsWithInternal() async throws {
        // Field 1, length-delimited, claims 5 bytes but 1 follows: not a valid SimpleRequest.
        let transport = FakeCallTransport(requests: [ByteBuffer(bytes: [0x0A, 0x05, 0x01])])

        let error = await #expect(throws: RPCError.self) {
            try await unaryCallMethod().run(makeContext(for: Grpc_Testing_TestService.Method.unaryCall), transport)
        }
        #expect(error?.code == .internal)
        #expect(await transport.sentResponses.isEmpty)
    }

    private func unaryCallMethod() throws -> ServerMethod {
        try #require(EchoingTestService().methods.first { $0.descriptor == Grpc_Testing_TestService.Method.unaryCall })
    }

    private func makeContext(for method: MethodDescriptor) -> ServerContext {
        ServerContext(method: method, requestMetadata: Metadata(), deadline: nil, peer: "ipv4:127.0.0.1:1")
    }
}

private struct Route: Equatable, CustomStringConvertible {
    let path: String
    let kind: RPCKind
    var description: String { "\(path) \(kind)" }
}

/// Answers unary calls; the streaming methods only need to exist for the routing test.
private struct EchoingTestService: Grpc_Testing_TestService.Handler {
    func emptyCall(request: Grpc_Testing_Empty, context: ServerContext) async throws -> Grpc_Testing_Empty {
        Grpc_Testing_Empty()
    }

    func unaryCall(
        request: Grpc_Testing_SimpleRequest, context: ServerContext
    ) async throws -> Grpc_Testing_SimpleResponse {
        var response = Grpc_Testing_SimpleResponse()
        response.payload.body = Data(count: Int(request.responseSize))
        if request.fillUsername { response.username = "echo" }
        return response
    }

    func cacheableUnaryCall(
        request: Grpc_Testing_SimpleRequest, context: ServerContext
    ) async throws -> Grpc_Testing_SimpleResponse {
        try await unaryCall(request: request, context: context)
    }

    func streamingOutputCall(
        request: Grpc_Testing_StreamingOutputCallRequest,
        responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, context: ServerContext
    ) async throws {
        throw RPCError(.unimplemented, "not needed by these tests")
    }

    func streamingInputCall(
        requests: RequestStream<Grpc_Testing_StreamingInputCallRequest>, context: ServerContext
    ) async throws -> Grpc_Testing_StreamingInputCallResponse {
        throw RPCError(.unimplemented, "not needed by these tests")
    }

    func fullDuplexCall(
        requests: RequestStream<Grpc_Testing_StreamingOutputCallRequest>,
        responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, context: ServerContext
    ) async throws {
        throw RPCError(.unimplemented, "not needed by these tests")
    }

    func halfDuplexCall(
        requests: RequestStream<Grpc_Testing_StreamingOutputCallRequest>,
        responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, context: ServerContext
    ) async throws {
        throw RPCError(.unimplemented, "not needed by these tests")
    }

    func unimplementedCall(request: Grpc_Testing_Empty, context: ServerContext) async throws -> Grpc_Testing_Empty {
        throw RPCError(.unimplemented, "grpc.testing.TestService/UnimplementedCall is never implemented")
    }
}

/// A transport without a network: hands out the given request payloads, then half-closes, and records responses.
private actor FakeCallTransport: ServerCallTransport {
    private var pendingRequests: [ByteBuffer]
    private(set) var sentResponses: [ByteBuffer] = []

    init(requests: [ByteBuffer]) {
        pendingRequests = requests
    }

    func nextRequest() async throws -> ReceivedMessage? {
        guard !pendingRequests.isEmpty else { return nil }
        return ReceivedMessage(payload: pendingRequests.removeFirst(), wasCompressed: false)
    }

    func sendResponse(_ payload: ByteBuffer, compressed: Bool) async throws {
        sentResponses.append(payload)
    }

    func sendInitialMetadata() async throws {}
}
