public import HabitFlowRPC
internal import Foundation

/// grpc/grpc's interop `TestService`, behaving as `doc/interop-test-descriptions.md` asks of a server: payloads of
/// the requested sizes, echoed metadata (`x-grpc-test-echo-initial`, `x-grpc-test-echo-trailing-bin`), echoed
/// statuses, and the compression checks.
public struct InteropTestService: Grpc_Testing_TestService.Handler {
    public init() {}

    public func emptyCall(request: Grpc_Testing_Empty, context: ServerContext) async throws -> Grpc_Testing_Empty {
        echoMetadata(context)
        return Grpc_Testing_Empty()
    }

    public func unaryCall(
        request: Grpc_Testing_SimpleRequest, context: ServerContext
    ) async throws -> Grpc_Testing_SimpleResponse {
        echoMetadata(context)
        try checkCompression(expected: request.hasExpectCompressed && request.expectCompressed.value, context: context)
        if request.hasResponseStatus { try throwEchoedStatus(request.responseStatus) }
        context.compressResponses = request.hasResponseCompressed && request.responseCompressed.value
        return .with { $0.payload = payload(size: request.responseSize, type: request.responseType) }
    }

    public func cacheableUnaryCall(
        request: Grpc_Testing_SimpleRequest, context: ServerContext
    ) async throws -> Grpc_Testing_SimpleResponse {
        try await unaryCall(request: request, context: context)
    }

    public func streamingOutputCall(
        request: Grpc_Testing_StreamingOutputCallRequest,
        responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, context: ServerContext
    ) async throws {
        echoMetadata(context)
        if request.hasResponseStatus { try throwEchoedStatus(request.responseStatus) }
        try await respond(to: request, with: responses)
    }

    public func streamingInputCall(
        requests: RequestStream<Grpc_Testing_StreamingInputCallRequest>, context: ServerContext
    ) async throws -> Grpc_Testing_StreamingInputCallResponse {
        echoMetadata(context)
        var total: Int32 = 0
        for try await request in requests {
            try checkCompression(expected: request.hasExpectCompressed && request.expectCompressed.value, context: context)
            total += Int32(request.payload.body.count)
        }
        return .with { $0.aggregatedPayloadSize = total }
    }

    public func fullDuplexCall(
        requests: RequestStream<Grpc_Testing_StreamingOutputCallRequest>,
        responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, context: ServerContext
    ) async throws {
        echoMetadata(context)
        for try await request in requests {
            if request.hasResponseStatus { try throwEchoedStatus(request.responseStatus) }
            try await respond(to: request, with: responses)
        }
    }

    public func halfDuplexCall(
        requests: RequestStream<Grpc_Testing_StreamingOutputCallRequest>,
        responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, context: ServerContext
    ) async throws {
        echoMetadata(context)
        var buffered: [Grpc_Testing_StreamingOutputCallRequest] = []
        for try await request in requests { buffered.append(request) }
        for request in buffered {
            if request.hasResponseStatus { try throwEchoedStatus(request.responseStatus) }
            try await respond(to: request, with: responses)
        }
    }

    public func unimplementedCall(request: Grpc_Testing_Empty, context: ServerContext) async throws -> Grpc_Testing_Empty {
        throw RPCError(.unimplemented, "\(context.method.path) is not implemented, on purpose")
    }

    // MARK: Behaviours shared by the methods

    private func respond(
        to request: Grpc_Testing_StreamingOutputCallRequest,
        with responses: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>
    ) async throws {
        for parameters in request.responseParameters {
            if parameters.intervalUs > 0 { try await Task.sleep(for: .microseconds(parameters.intervalUs)) }
            try await responses.write(
                .with { $0.payload = payload(size: parameters.size, type: request.responseType) },
                compressed: parameters.hasCompressed && parameters.compressed.value)
        }
    }

    private func echoMetadata(_ context: ServerContext) {
        for value in context.requestMetadata.values("x-grpc-test-echo-initial") {
            if case .text(let text) = value { context.addInitialMetadata("x-grpc-test-echo-initial", text) }
        }
        for value in context.requestMetadata.values("x-grpc-test-echo-trailing-bin") {
            if case .binary(let bytes) = value {
                var trailer = Metadata()
                trailer.add("x-grpc-test-echo-trailing-bin", binary: bytes)
                context.addTrailers(trailer)
            }
        }
    }

    private func checkCompression(expected: Bool, context: ServerContext) throws {
        if expected && !context.lastRequestCompressed {
            throw RPCError(.invalidArgument, "expected a compressed request message")
        }
    }

    private func throwEchoedStatus(_ status: Grpc_Testing_EchoStatus) throws {
        guard status.code != 0 else { return }
        let code = RPCStatusCode(rawValue: Int(status.code)) ?? .unknown
        throw RPCError(code, status.message)
    }

    private func payload(size: Int32, type: Grpc_Testing_PayloadType) -> Grpc_Testing_Payload {
        .with {
            $0.type = type
            $0.body = Data(count: Int(max(size, 0)))
        }
    }
}
