import Foundation
import GRPCInteropTesting
import HabitFlowGRPCProtos
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCProxy
import HabitFlowRPCServer
import HabitFlowTestSupport
import NIOCore
import SwiftProtobuf
import Testing

/// A proxy server that forwards grpc.testing.TestService and the probe service to a backend, and a client channel
/// to the proxy: the transparent forwarding a gateway is built on.
private struct ProxiedBackend {
    let backend: RPCServer
    let probe: ServerProbe
    let proxy: RPCServer
    let backendChannel: RPCChannel
    let client: RPCChannel
    /// What the prepare hook (or the fast path's `decide`) saw, one entry per forwarded call.
    let prepared: Shared<[String]>
    /// How the fast path's calls ended, as its `ended` hook saw them (`OK` or the error's code).
    let fastPathEnds: Shared<[RPCStatusCode]>

    static let probeSchema = ServiceSchema(
        name: "test.ClientProbe",
        methods: [
            MethodSchema(descriptor: ProbeService.sleep, kind: .unary),
            MethodSchema(descriptor: ProbeService.fail, kind: .unary),
            MethodSchema(descriptor: ProbeService.metadata, kind: .unary, idempotency: .noSideEffects),
            MethodSchema(descriptor: ProbeService.unavailable, kind: .unary, idempotency: .idempotent),
            MethodSchema(descriptor: ProbeService.headersFirst, kind: .serverStreaming),
        ])

    /// - Parameter fastPath: unary calls take the event-loop path (``EventLoopUnaryForwarder``), shaped like the
    ///   others; `decide` declines calls with `x-take-general-path`, refuses calls with `x-refuse`, and leaves calls
    ///   with `x-decide-in-task` (`forward` or `refuse`) to a task that waits 20 ms first.
    static func start(
        fastPath: Bool = false, configureBackend: (inout RPCServerConfiguration) -> Void = { _ in }
    ) async throws -> ProxiedBackend {
        let probe = ServerProbe()
        let backend = try await startServer(probe: probe, configure: configureBackend)
        let backendChannel = try makeChannel(ports: [backend.port])
        let testService = try ServiceSchema.load(
            Grpc_Testing_TestService.name, fromDescriptorSets: [GRPCInteropTestingDescriptorSet.base64])
        let prepared = Shared<[String]>([])
        let fastPathEnds = Shared<[RPCStatusCode]>([])
        @Sendable func shape(_ method: MethodSchema, _ options: inout CallOptions) {
            prepared.update { $0.append(method.descriptor.method) }
            options.metadata.removeAll("authorization")
            options.metadata.add("x-forwarded-by", "proxy")
        }
        let prepare: ForwardingService.PrepareCall = { method, _, options in shape(method, &options) }
        let unaryForwarders: ForwardingService.UnaryForwarders = { method in
            guard fastPath else { return nil }
            return EventLoopUnaryForwarder(method: method, channel: backendChannel) { context in
                if context.requestMetadata["x-take-general-path"] != nil { return .decline }
                if context.requestMetadata["x-refuse"] != nil {
                    return .refuse(RPCError(.permissionDenied, "refused on the fast path"))
                }
                @Sendable func forward() -> EventLoopUnaryForwarder.Decision {
                    var options = CallOptions.forwarding(method, from: context)
                    shape(method, &options)
                    return .forward(options) { outcome in
                        fastPathEnds.update { ends in
                            switch outcome {
                            case .success: ends.append(.ok)
                            case .failure(let error): ends.append((error as? RPCError)?.code ?? .unknown)
                            }
                        }
                        return outcome
                    }
                }
                guard let inTask = context.requestMetadata["x-decide-in-task"] else { return forward() }
                return .decideInTask {
                    try? await Task.sleep(for: .milliseconds(20))
                    return inTask == "refuse" ? .refuse(RPCError(.unauthenticated, "refused in the task")) : forward()
                }
            }
        }
        var configuration = RPCServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.maxReceiveMessageSize = 16 << 20
        let proxy = RPCServer(
            configuration: configuration,
            services: [
                ForwardingService(
                    schema: testService, transport: backendChannel, unaryForwarders: unaryForwarders, prepare: prepare),
                ForwardingService(
                    schema: probeSchema, transport: backendChannel, unaryForwarders: unaryForwarders, prepare: prepare),
            ],
            logger: quietLogger)
        try await proxy.start()
        return ProxiedBackend(
            backend: backend, probe: probe, proxy: proxy, backendChannel: backendChannel,
            client: try makeChannel(ports: [proxy.port]), prepared: prepared, fastPathEnds: fastPathEnds)
    }

    func stop() async {
        await client.close()
        await proxy.shutdown()
        await backendChannel.close()
        await backend.shutdown()
    }
}

@Suite struct ForwardingTests {
    @Test func schemaFromDescriptorSet() throws {
        let schema = try ServiceSchema.load(
            Grpc_Testing_TestService.name, fromDescriptorSets: [GRPCInteropTestingDescriptorSet.base64])
        let kinds = Dictionary(uniqueKeysWithValues: schema.methods.map { ($0.descriptor.method, $0.kind) })
        #expect(schema.methods.map(\.descriptor) == Grpc_Testing_TestService.Method.all)
        #expect(kinds["UnaryCall"] == .unary)
        #expect(kinds["StreamingOutputCall"] == .serverStreaming)
        #expect(kinds["StreamingInputCall"] == .clientStreaming)
        #expect(kinds["FullDuplexCall"] == .bidirectionalStreaming)
        #expect(throws: RPCError.self) {
            try ServiceSchema.load("grpc.testing.Nope", fromDescriptorSets: [GRPCInteropTestingDescriptorSet.base64])
        }
    }

    @Test(arguments: [false, true]) func allFourKindsPassThrough(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        let client = Grpc_Testing_TestService.Client(transport: proxied.client)

        try await exerciseAllFourKinds(client)
        #expect(
            proxied.prepared.value == ["UnaryCall", "EmptyCall", "StreamingOutputCall", "StreamingInputCall", "FullDuplexCall"])
        // EmptyCall takes the fast path. UnaryCall's 271 KB request spans several reads, so its handler starts
        // before the request is in: it takes the general path, like the streaming calls.
        #expect(proxied.fastPathEnds.value == (fastPath ? [.ok] : []))
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func metadataBothWaysWithoutHopByHopFields(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        let client = Grpc_Testing_TestService.Client(transport: proxied.client)
        var options = CallOptions()
        options.metadata.add("x-grpc-test-echo-initial", "test_initial_metadata_value")
        options.metadata.add("x-grpc-test-echo-trailing-bin", binary: [0xab, 0xab, 0xab])
        let unary = try await client.unaryCallWithMetadata(.with { $0.responseSize = 10 }, options: options)
        #expect(unary.initialMetadata["x-grpc-test-echo-initial"] == "test_initial_metadata_value")
        #expect(unary.trailers.binary("x-grpc-test-echo-trailing-bin") == [0xab, 0xab, 0xab])

        let (requests, continuation) = requestStream(of: Grpc_Testing_StreamingOutputCallRequest.self)
        let stream = try await client.fullDuplexCall(requests: requests, options: options)
        continuation.yield(.with { $0.responseParameters = [.with { $0.size = 5 }] })
        #expect(try await stream.initialMetadata()["x-grpc-test-echo-initial"] == "test_initial_metadata_value")
        continuation.finish()
        var count = 0
        for try await _ in stream { count += 1 }
        #expect(count == 1)
        #expect(stream.trailers.binary("x-grpc-test-echo-trailing-bin") == [0xab, 0xab, 0xab])

        // A backend that sends its headers long before its first message: they come through at once.
        let started = ContinuousClock.now
        let early = try await proxied.client.serverStreaming(
            ProbeService.headersFirst, Google_Protobuf_Int64Value(60_000), options: CallOptions(),
            responseType: Google_Protobuf_Empty.self)
        #expect(try await early.initialMetadata()["x-probe"] == "early")
        #expect(ContinuousClock.now - started < .seconds(50))
        early.cancel()

        // The prepare hook shapes the outgoing call; the trace continues in a child span.
        let trace = TraceContext.newRoot()
        var probeOptions = CallOptions()
        probeOptions.metadata.add("authorization", "Bearer client-token")
        probeOptions.metadata.add("x-user", "42")
        probeOptions.metadata.add(TraceContext.headerName, trace.traceparent)
        let seen = try await proxied.client.unary(
            ProbeService.metadata, Google_Protobuf_Empty(), options: probeOptions,
            responseType: Google_Protobuf_StringValue.self
        ).message.value
        let fields = Dictionary(
            uniqueKeysWithValues: seen.split(separator: ";").map { entry in
                let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
            })
        #expect(fields["authorization"] == "")
        #expect(fields["x-user"] == "42")
        let forwardedTrace = try #require(fields["traceparent"].flatMap(TraceContext.init(traceparent:)))
        #expect(forwardedTrace.traceID == trace.traceID)
        #expect(forwardedTrace.parentID != trace.parentID)
        await proxied.stop()
    }

    @Test(
        "fields sent never indexed (HPACK) are passed on never indexed, both ways; others stay indexable",
        arguments: [false, true])
    func neverIndexedFieldsStayNeverIndexed(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        var options = CallOptions()
        options.metadata.add("x-secret", "s3cret", neverIndexed: true)
        options.metadata.add("x-user", "42")
        options.metadata.add(TraceContext.headerName, TraceContext.newRoot().traceparent)
        let response = try await proxied.client.unary(
            ProbeService.metadata, Google_Protobuf_Empty(), options: options, responseType: Google_Protobuf_StringValue.self)
        // The proxy continues the trace in a child span, unique to the call: that one is sent never indexed.
        #expect(response.message.value.hasSuffix(";never-indexed=traceparent,x-secret"))
        #expect(response.initialMetadata.first { $0.key == "x-probe-secret" }?.neverIndexed == true)
        #expect(response.initialMetadata.first { $0.key == "x-probe" }?.neverIndexed == false)
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func statusDetailsAndTrailersUnchanged(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        func failure(through channel: RPCChannel) async -> RPCError? {
            do {
                _ = try await channel.unary(
                    ProbeService.fail, Google_Protobuf_Empty(), options: CallOptions(),
                    responseType: Google_Protobuf_Empty.self)
                return nil
            } catch {
                return error as? RPCError
            }
        }
        let direct = try #require(await failure(through: proxied.backendChannel))
        let forwarded = try #require(await failure(through: proxied.client))
        #expect(forwarded == direct)
        #expect(forwarded.code == .invalidArgument)
        #expect(forwarded.message == "name: must not be empty ☹\tnew\nline")
        #expect(forwarded.fieldViolations == [FieldViolation(field: "name", description: "must not be empty")])
        // grpc-status-details-bin byte for byte.
        #expect(forwarded.receivedStatusDetails != nil)
        #expect(forwarded.receivedStatusDetails == direct.receivedStatusDetails)

        // An error after streamed messages: the messages, then the backend's status.
        let client = Grpc_Testing_TestService.Client(transport: proxied.client)
        let (requests, continuation) = requestStream(of: Grpc_Testing_StreamingOutputCallRequest.self)
        let stream = try await client.fullDuplexCall(requests: requests)
        continuation.yield(.with { $0.responseParameters = [.with { $0.size = 3 }] })
        continuation.yield(.with { $0.responseStatus = .with { $0.code = 9; $0.message = "echoed \t status ✓" } })
        continuation.finish()
        var messages = 0
        let error = await #expect(throws: RPCError.self) {
            for try await _ in stream { messages += 1 }
        }
        #expect(messages == 1)
        #expect(error?.code == .failedPrecondition)
        #expect(error?.message == "echoed \t status ✓")

        // A method the backend does not implement.
        let unimplemented = await #expect(throws: RPCError.self) { try await client.unimplementedCall(.init()) }
        #expect(unimplemented?.code == .unimplemented)
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func compressedResponsesStayCompressed(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        let request = Grpc_Testing_StreamingOutputCallRequest.with {
            $0.responseParameters = [
                .with { $0.size = 4096; $0.compressed = .with { $0.value = true } },
                .with { $0.size = 4096; $0.compressed = .with { $0.value = false } },
            ]
        }
        let call = try await proxied.client.startCall(
            Grpc_Testing_TestService.Method.streamingOutputCall, options: CallOptions(),
            singleRequest: ByteBuffer(bytes: try request.serializedBytes() as [UInt8]))
        var flags: [Bool] = []
        while let message = try await call.nextReceivedMessage() {
            flags.append(message.wasCompressed)
            let decoded = try Grpc_Testing_StreamingOutputCallResponse(serializedBytes: Array(buffer: message.payload))
            #expect(decoded.payload.body.count == 4096)
        }
        #expect(flags == [true, false])
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func deadlineIsTheRemainingBudget(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        // The backend is given what is left of the client's budget, not a fresh one.
        _ = try await proxied.client.unary(
            ProbeService.sleep, Google_Protobuf_Int64Value(0), options: CallOptions(timeout: .seconds(20)),
            responseType: Google_Protobuf_Empty.self)
        let remaining = try #require(proxied.probe.timesRemaining.first)
        #expect(remaining <= .seconds(20) && remaining > .zero)
        // Without one, the backend gets no deadline at all (the proxy's prepare hook adds none here).
        _ = try await proxied.client.unary(
            ProbeService.sleep, Google_Protobuf_Int64Value(0), options: CallOptions(),
            responseType: Google_Protobuf_Empty.self)
        #expect(proxied.probe.timesRemaining.count == 1)
        // A call that outlives its deadline ends DEADLINE_EXCEEDED (the backend's handler is cancelled: see
        // clientCancellationReachesTheBackend).
        let error = await #expect(throws: RPCError.self) {
            _ = try await proxied.client.unary(
                ProbeService.sleep, Google_Protobuf_Int64Value(60_000), options: CallOptions(timeout: .seconds(1)),
                responseType: Google_Protobuf_Empty.self)
        }
        #expect(error?.code == .deadlineExceeded)
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func clientCancellationReachesTheBackend(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        let channel = proxied.client
        let call = Task {
            try await channel.unary(
                ProbeService.sleep, Google_Protobuf_Int64Value(60_000), options: CallOptions(),
                responseType: Google_Protobuf_Empty.self)
        }
        #expect(await proxied.probe.waitFor("sleep started", timeout: .seconds(30)))
        call.cancel()
        #expect(await proxied.probe.waitFor("sleep cancelled", timeout: .seconds(30)))
        let outcome = await call.result
        #expect((try? outcome.get()) == nil)
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func backendCancellationReachesTheClient(fastPath: Bool) async throws {
        // The backend's grace period runs out during shutdown: it resets the call (RST_STREAM CANCEL).
        let proxied = try await ProxiedBackend.start(fastPath: fastPath) {
            $0.connectionManagement.gracePeriod = .milliseconds(200)
        }
        let channel = proxied.client
        let call = Task {
            try await channel.unary(
                ProbeService.sleep, Google_Protobuf_Int64Value(60_000), options: CallOptions(),
                responseType: Google_Protobuf_Empty.self)
        }
        #expect(await proxied.probe.waitFor("sleep started", timeout: .seconds(30)))
        await proxied.backend.shutdown()
        let error = await #expect(throws: RPCError.self) { _ = try await call.value }
        #expect(error?.code == .cancelled)
        await proxied.stop()
    }

    @Test func fastPathDeclinesAndRefuses() async throws {
        let proxied = try await ProxiedBackend.start(fastPath: true)
        let empty = Google_Protobuf_Empty()
        // Declined: the general path forwards it (its prepare hook runs), not the fast path's end hook.
        var declined = CallOptions()
        declined.metadata.add("x-take-general-path", "1")
        _ = try await proxied.client.unary(
            ProbeService.metadata, empty, options: declined, responseType: Google_Protobuf_StringValue.self)
        #expect(proxied.prepared.value == ["Metadata"])
        #expect(proxied.fastPathEnds.value.isEmpty)
        // Refused: the client gets decide's error; nothing reaches the backend.
        var refused = CallOptions()
        refused.metadata.add("x-refuse", "1")
        let error = await #expect(throws: RPCError.self) {
            _ = try await proxied.client.unary(
                ProbeService.metadata, empty, options: refused, responseType: Google_Protobuf_StringValue.self)
        }
        #expect(error?.code == .permissionDenied)
        #expect(error?.message == "refused on the fast path")
        #expect(proxied.prepared.value == ["Metadata"])
        // Taken: forwarded and ended through the hook.
        _ = try await proxied.client.unary(
            ProbeService.metadata, empty, options: CallOptions(), responseType: Google_Protobuf_StringValue.self)
        #expect(proxied.prepared.value == ["Metadata", "Metadata"])
        #expect(proxied.fastPathEnds.value == [.ok])
        await proxied.stop()
    }

    /// What a gateway does with a token its caches do not know: the decision waits in a task, then refuses or
    /// forwards as on the event loop.
    @Test func fastPathDecidesInATaskWhenItMustWait() async throws {
        let proxied = try await ProxiedBackend.start(fastPath: true)
        let empty = Google_Protobuf_Empty()
        var forwarded = CallOptions()
        forwarded.metadata.add("x-decide-in-task", "forward")
        forwarded.metadata.add("authorization", "Bearer secret")
        forwarded.metadata.add("x-user", "7")
        let response = try await proxied.client.unary(
            ProbeService.metadata, empty, options: forwarded, responseType: Google_Protobuf_StringValue.self)
        // Shaped as on the event loop: the authorization is gone, the rest passed on.
        #expect(response.message.value.hasPrefix("authorization=;"))
        #expect(response.message.value.contains(";x-user=7;"))
        #expect(proxied.prepared.value == ["Metadata"])
        #expect(proxied.fastPathEnds.value == [.ok])

        var refused = CallOptions()
        refused.metadata.add("x-decide-in-task", "refuse")
        let error = await #expect(throws: RPCError.self) {
            _ = try await proxied.client.unary(
                ProbeService.metadata, empty, options: refused, responseType: Google_Protobuf_StringValue.self)
        }
        #expect(error?.code == .unauthenticated)
        #expect(error?.message == "refused in the task")
        // Nothing reached the backend, and the end hook belongs to forwarded calls only.
        #expect(proxied.prepared.value == ["Metadata"])
        #expect(proxied.fastPathEnds.value == [.ok])
        await proxied.stop()
    }

    @Test func fastPathWithTheBackendDownAnswersUnavailable() async throws {
        let proxied = try await ProxiedBackend.start(fastPath: true)
        let empty = Google_Protobuf_Empty()
        _ = try await proxied.client.unary(
            ProbeService.metadata, empty, options: CallOptions(), responseType: Google_Protobuf_StringValue.self)
        await proxied.backend.shutdown()
        // No connection is ready on the loop any more: the call continues in a task, which finds the backend gone.
        let started = ContinuousClock.now
        let error = await #expect(throws: RPCError.self) {
            _ = try await proxied.client.unary(
                ProbeService.metadata, empty, options: CallOptions(timeout: .seconds(20)),
                responseType: Google_Protobuf_StringValue.self)
        }
        #expect(error?.code == .unavailable)
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(proxied.fastPathEnds.value == [.ok, .unavailable])
        await proxied.stop()
    }

    /// An idempotent call failing `UNAVAILABLE` is retried as the channel's policy allows on both paths: 5 attempts
    /// in all. On the general path `maxAttempts` (5) ends it; on the fast path the event-loop attempt comes first and
    /// the task's attempts follow, until the retry budget (10 tokens, no retries at 5 or fewer) ends them after four.
    @Test(arguments: [false, true]) func unavailableIdempotentCallsAreRetried(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        // Once connected, so that the fast path finds a ready connection for its first attempt.
        _ = try await proxied.client.unary(
            ProbeService.metadata, Google_Protobuf_Empty(), options: CallOptions(),
            responseType: Google_Protobuf_StringValue.self)
        let error = await #expect(throws: RPCError.self) {
            _ = try await proxied.client.unary(
                ProbeService.unavailable, Google_Protobuf_Empty(), options: CallOptions(timeout: .seconds(20)),
                responseType: Google_Protobuf_Empty.self)
        }
        #expect(error?.code == .unavailable)
        #expect(error?.message == "try again later")
        #expect(proxied.probe.count("unavailable") == 5)
        #expect(proxied.fastPathEnds.value == (fastPath ? [.ok, .unavailable] : []))
        await proxied.stop()
    }

    @Test(arguments: [false, true]) func requestStreamFromTheClientIsRelayedInOrder(fastPath: Bool) async throws {
        let proxied = try await ProxiedBackend.start(fastPath: fastPath)
        let client = Grpc_Testing_TestService.Client(transport: proxied.client)
        // Half duplex: the backend answers only after the client half-closed, which must travel through too.
        let requests = (1...20).map { size in
            Grpc_Testing_StreamingOutputCallRequest.with { $0.responseParameters = [.with { $0.size = Int32(size) }] }
        }
        var sizes: [Int] = []
        for try await response in try await client.halfDuplexCall(requests: AsyncArray(requests)) {
            sizes.append(response.payload.body.count)
        }
        #expect(sizes == Array(1...20))
        await proxied.stop()
    }
}
