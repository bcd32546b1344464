import HabitFlowTestSupport
import Foundation
import GRPCInteropTesting
import HabitFlowGRPCProtos
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowRPCServer
import HabitFlowTLS
import SwiftProtobuf
import HabitFlowLocking
import Testing

/// Our client against our server, over loopback. Serialized: the memory test reads the process's RSS.
@Suite(.serialized)
struct RPCClientTests {
    private func payloadRequest(size: Int32, responseSize: Int32) -> Grpc_Testing_SimpleRequest {
        .with {
            $0.responseSize = responseSize
            $0.payload = .with { $0.body = Data(count: Int(size)) }
        }
    }

    @Test func allFourKindsOfRPC() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        let client = Grpc_Testing_TestService.Client(transport: channel)

        try await exerciseAllFourKinds(client)

        await channel.close()
        await server.shutdown()
    }

    @Test func deadlineIsSentAndEnforced() async throws {
        let probe = ServerProbe()
        let server = try await startServer(probe: probe)
        let channel = try makeChannel(ports: [server.port])
        try await channel.connect()
        let started = ContinuousClock.now
        let error = await #expect(throws: RPCError.self) {
            let _: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
                ProbeService.sleep, Google_Protobuf_Int64Value(5_000), options: CallOptions(timeout: .seconds(1)))
        }
        #expect(error?.code == .deadlineExceeded)
        #expect(ContinuousClock.now - started < .seconds(3))
        #expect(await probe.waitFor("sleep started"))
        let remaining = try #require(probe.timesRemaining.first)
        #expect(remaining > .zero && remaining <= .seconds(1))
        #expect(await probe.waitFor("sleep cancelled"))
        await channel.close()
        await server.shutdown()
    }

    @Test("calls on one connection each end at their own deadline, a later shorter one first")
    func deadlinesOfSeveralCalls() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        try await channel.connect()
        @Sendable func sleep(_ milliseconds: Int64, timeout: Duration) async -> (RPCStatusCode, Duration) {
            let started = ContinuousClock.now
            do {
                let _: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
                    ProbeService.sleep, Google_Protobuf_Int64Value(milliseconds), options: CallOptions(timeout: timeout))
                return (.ok, ContinuousClock.now - started)
            } catch {
                return ((error as? RPCError)?.code ?? .unknown, ContinuousClock.now - started)
            }
        }
        async let long = sleep(10_000, timeout: .seconds(2))
        try await Task.sleep(for: .milliseconds(100))
        async let short = sleep(10_000, timeout: .milliseconds(200))
        async let finishing = sleep(100, timeout: .seconds(10))
        let (shortCode, shortTime) = await short
        #expect(shortCode == .deadlineExceeded)
        #expect(shortTime < .milliseconds(1500))
        let (longCode, longTime) = await long
        #expect(longCode == .deadlineExceeded)
        #expect(longTime >= .milliseconds(1900) && longTime < .seconds(5))
        #expect(await finishing.0 == .ok)
        await channel.close()
        await server.shutdown()
    }

    @Test func cancellingTheTaskCancelsTheServerHandler() async throws {
        let probe = ServerProbe()
        let server = try await startServer(probe: probe)
        let channel = try makeChannel(ports: [server.port])
        let call = Task {
            let _: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
                ProbeService.sleep, Google_Protobuf_Int64Value(10_000), options: CallOptions())
        }
        #expect(await probe.waitFor("sleep started"))
        call.cancel()
        let result = await call.result
        #expect((try? result.get()) == nil)
        if case .failure(let error as RPCError) = result { #expect(error.code == .cancelled) }
        #expect(await probe.waitFor("sleep cancelled"))
        await channel.close()
        await server.shutdown()
    }

    @Test func metadataBinaryMetadataAndInterceptors() async throws {
        let server = try await startServer()
        let finished = Locked<[String]>([])
        let channel = try makeChannel(
            ports: [server.port],
            interceptors: [
                BearerTokenInterceptor { "secret-token" }, TraceContextInterceptor(),
                MetricsClientInterceptor { method, code, _ in finished.withLock { $0.append("\(method.method) \(code)") } },
            ])
        let client = Grpc_Testing_TestService.Client(transport: channel)
        var options = CallOptions()
        options.metadata.add("x-grpc-test-echo-initial", "test_initial_metadata_value")
        options.metadata.add("x-grpc-test-echo-trailing-bin", binary: [0xAB, 0xAB, 0xAB, 0x00, 0xFF])
        let response = try await client.unaryCallWithMetadata(payloadRequest(size: 10, responseSize: 10), options: options)
        #expect(response.initialMetadata["x-grpc-test-echo-initial"] == "test_initial_metadata_value")
        #expect(response.trailers.binary("x-grpc-test-echo-trailing-bin") == [0xAB, 0xAB, 0xAB, 0x00, 0xFF])

        // Streaming responses carry both too.
        let stream = try await client.streamingOutputCall(
            .with { $0.responseParameters = [.with { $0.size = 1 }] }, options: options)
        #expect(try await stream.initialMetadata()["x-grpc-test-echo-initial"] == "test_initial_metadata_value")
        for try await _ in stream {}
        #expect(stream.trailers.binary("x-grpc-test-echo-trailing-bin") == [0xAB, 0xAB, 0xAB, 0x00, 0xFF])

        // Interceptors: the token and a traceparent reach the server, and every call is reported.
        let seen: UnaryResponse<Google_Protobuf_StringValue> = try await channel.unary(
            ProbeService.metadata, Google_Protobuf_Empty(), options: CallOptions(metadata: ["x-user": "42"]))
        let fields = seen.message.value.split(separator: ";")
        #expect(fields.contains("authorization=Bearer secret-token"))
        #expect(fields.contains("x-user=42"))
        let traceparent = try #require(fields.first { $0.hasPrefix("traceparent=") })
        #expect(TraceContext(traceparent: String(traceparent.dropFirst("traceparent=".count))) != nil)
        // Sent never indexed (HPACK): the new trace id, unique to the call, by our choice; the token because nghttp2
        // encodes every `authorization` field so.
        #expect(fields.contains("never-indexed=authorization,traceparent"))
        #expect(finished.withLock { $0 } == ["UnaryCall OK", "StreamingOutputCall OK", "Metadata OK"])

        // The same connections without the interceptors: nothing is added, nothing reported.
        let bypassed: UnaryResponse<Google_Protobuf_StringValue> = try await channel.bypassingInterceptors.unary(
            ProbeService.metadata, Google_Protobuf_Empty(), options: CallOptions(metadata: ["x-user": "43"]))
        #expect(bypassed.message.value == "authorization=;traceparent=;x-user=43;never-indexed=")
        #expect(finished.withLock { $0 }.count == 3)
        await channel.close()
        await server.shutdown()
    }

    @Test func deadlineAndTracePropagationFromAServerContext() {
        let incoming = ServerContext(
            method: ProbeService.sleep,
            requestMetadata: ["traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
            deadline: .now + .seconds(2), peer: "test")
        let options = CallOptions(timeout: .seconds(30)).propagating(from: incoming)
        #expect(options.effectiveDeadline()! <= incoming.deadline!)
        let outgoing = TraceContext(traceparent: options.metadata["traceparent"] ?? "")
        #expect(outgoing?.traceID == "0af7651916cd43dd8448eb211c80319c")
        #expect(outgoing?.parentID != "b7ad6b7169203331")
    }

    @Test func statusWithMessageAndDetails() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        let error = await #expect(throws: RPCError.self) {
            let _: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
                ProbeService.fail, Google_Protobuf_Empty(), options: CallOptions())
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message == "name: must not be empty ☹\tnew\nline")
        let detail = try #require(error?.details.first)
        let badRequest = try Google_Rpc_BadRequest(unpackingAny: detail)
        #expect(badRequest.fieldViolations.first?.field == "name")

        let client = Grpc_Testing_TestService.Client(transport: channel)
        let unimplemented = await #expect(throws: RPCError.self) {
            _ = try await Grpc_Testing_UnimplementedService.Client(transport: channel).unimplementedCall(.init())
        }
        #expect(unimplemented?.code == .unimplemented)
        let echoed = await #expect(throws: RPCError.self) {
            _ = try await client.unaryCall(.with { $0.responseStatus = .with { $0.code = 2; $0.message = "echo ✓" } })
        }
        #expect(echoed?.code == .unknown && echoed?.message == "echo ✓")
        await channel.close()
        await server.shutdown()
    }

    @Test func gzipBothWays() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        let client = Grpc_Testing_TestService.Client(transport: channel)
        var request = payloadRequest(size: 271_828, responseSize: 314_159)
        request.expectCompressed = .with { $0.value = true }  // the server refuses an uncompressed request
        request.responseCompressed = .with { $0.value = true }
        let response = try await client.unaryCall(request, options: CallOptions(compression: .gzip))
        #expect(response.payload.body.count == 314_159)
        // Without compression the same request is refused: the flag above is really checked.
        await #expect(throws: RPCError.self) { _ = try await client.unaryCall(request) }
        await channel.close()
        await server.shutdown()
    }

    @Test func largeMessagesBothWays() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        let payload = Data((0..<(6 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let echoed: UnaryResponse<Google_Protobuf_BytesValue> = try await channel.unary(
            ProbeService.echo, Google_Protobuf_BytesValue(payload), options: CallOptions())
        #expect(echoed.message.value == payload)

        // 24 MiB streamed down in 3 MiB messages (beyond every flow-control window).
        let client = Grpc_Testing_TestService.Client(transport: channel)
        let stream = try await client.streamingOutputCall(
            .with { $0.responseParameters = Array(repeating: .with { $0.size = 3 << 20 }, count: 8) })
        var total = 0
        for try await message in stream { total += message.payload.body.count }
        #expect(total == 24 << 20)

        // Beyond the client's receive limit: RESOURCE_EXHAUSTED.
        var small = CallOptions()
        small.maxReceiveMessageSize = 1 << 20
        let tooLarge = await #expect(throws: RPCError.self) {
            _ = try await client.unaryCall(payloadRequest(size: 0, responseSize: 2 << 20), options: small)
        }
        #expect(tooLarge?.code == .resourceExhausted)
        await channel.close()
        await server.shutdown()
    }

    @Test func manyConcurrentCallsOnOneConnection() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        let client = Grpc_Testing_TestService.Client(transport: channel)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<500 {
                group.addTask {
                    try await client.unaryCall(.with { $0.responseSize = Int32(index) }).payload.body.count
                }
            }
            var sizes: Set<Int> = []
            for try await size in group { sizes.insert(size) }
            #expect(sizes == Set(0..<500))
        }
        await channel.close()
        await server.shutdown()
    }

    @Test func reconnectsAfterTheServerRestarts() async throws {
        var server = try await startServer(name: "first")
        let port = server.port
        let channel = try makeChannel(ports: [port])
        let whoAmI: @Sendable () async throws -> String = {
            let response: UnaryResponse<Google_Protobuf_StringValue> = try await channel.unary(
                ProbeService.whoAmI, Google_Protobuf_Empty(), options: CallOptions())
            return response.message.value
        }
        #expect(try await whoAmI() == "first")
        await server.shutdown()
        let down = await #expect(throws: RPCError.self) { _ = try await whoAmI() }
        #expect(down?.code == .unavailable)

        server = try await startServer(port: port, name: "second")
        // The failed attempt started a backoff (about 1 s); the channel reconnects by itself after it.
        var answer: String?
        let deadline = ContinuousClock.now + .seconds(5)
        while answer == nil, ContinuousClock.now < deadline {
            answer = try? await whoAmI()
            if answer == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answer == "second")
        await channel.close()
        await server.shutdown()
    }

    @Test("a server that cannot be reached: the message names the service, the address is only in the cause")
    func unreachableServersAreNamedNotAddressed() async throws {
        let server = try await startServer(name: "gone")
        let port = server.port
        await server.shutdown()
        let channel = try makeChannel(ports: [port]) { $0.serviceName = "habits" }
        // The first call's attempt is refused; the next fails at once while the channel backs off.
        for _ in 0..<2 {
            let error = await #expect(throws: RPCError.self) {
                let _: UnaryResponse<Google_Protobuf_StringValue> = try await channel.unary(
                    ProbeService.whoAmI, Google_Protobuf_Empty(), options: CallOptions(idempotent: false))
            }
            #expect(error?.code == .unavailable)
            #expect(error?.message == "the habits service is unavailable; retry later")
            #expect(error.flatMap(\.cause).map { "\($0)" }?.contains("127.0.0.1:\(port)") == true)
        }
        await channel.close()
    }

    @Test func roundRobinAcrossReplicasWithOneDown() async throws {
        let first = try await startServer(name: "a")
        let second = try await startServer(name: "b")
        let stopped = try await startServer(name: "c")
        let downPort = stopped.port
        await stopped.shutdown()
        let channel = try makeChannel(ports: [first.port, downPort, second.port])
        // Until both live replicas are connected, calls go to whichever is ready.
        let warmUpEnd = ContinuousClock.now + .seconds(3)
        var warmedUp: Set<String> = []
        while warmedUp.count < 2, ContinuousClock.now < warmUpEnd {
            let response: UnaryResponse<Google_Protobuf_StringValue> = try await channel.unary(
                ProbeService.whoAmI, Google_Protobuf_Empty(), options: CallOptions())
            warmedUp.insert(response.message.value)
        }
        var counts: [String: Int] = [:]
        for _ in 0..<40 {
            let response: UnaryResponse<Google_Protobuf_StringValue> = try await channel.unary(
                ProbeService.whoAmI, Google_Protobuf_Empty(), options: CallOptions())
            counts[response.message.value, default: 0] += 1
        }
        #expect(counts.keys.sorted() == ["a", "b"])
        #expect(counts == ["a": 20, "b": 20])
        await channel.close()
        await first.shutdown()
        await second.shutdown()
    }

    @Test func retriesOnlyIdempotentCallsWithinTheBudget() async throws {
        let probe = ServerProbe()
        let server = try await startServer(probe: probe)
        let channel = try makeChannel(ports: [server.port])
        func callUnavailable(idempotent: Bool) async -> RPCError? {
            await #expect(throws: RPCError.self) {
                let _: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
                    ProbeService.unavailable, Google_Protobuf_Empty(), options: CallOptions(idempotent: idempotent))
            }
        }
        #expect(await callUnavailable(idempotent: false)?.code == .unavailable)
        #expect(probe.count("unavailable") == 1)
        #expect(await callUnavailable(idempotent: true)?.code == .unavailable)
        #expect(probe.count("unavailable") == 1 + 5)  // maxAttempts
        // Four failed attempts took the budget (10 tokens) to its threshold: no more retries for now.
        #expect(await callUnavailable(idempotent: true)?.code == .unavailable)
        #expect(probe.count("unavailable") == 1 + 5 + 1)
        await channel.close()
        await server.shutdown()
    }

    @Test func inFlightCallsFinishAfterGoawayAndNewCallsUseANewConnection() async throws {
        let probe = ServerProbe()
        let server = try await startServer(probe: probe) { configuration in
            configuration.connectionManagement.maxConnectionAge = .milliseconds(300)
        }
        let channel = try makeChannel(ports: [server.port])
        // Outlives the connection's age: it must still complete on the old connection.
        let sleep: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
            ProbeService.sleep, Google_Protobuf_Int64Value(800), options: CallOptions())
        _ = sleep
        for _ in 0..<5 {
            let _: UnaryResponse<Google_Protobuf_StringValue> = try await channel.unary(
                ProbeService.whoAmI, Google_Protobuf_Empty(), options: CallOptions())
            try await Task.sleep(for: .milliseconds(150))
        }
        #expect(probe.recorded.filter { $0 == "sleep finished" }.count == 1)
        await channel.close()
        await server.shutdown()
    }

    @Test func tlsWithALPN() async throws {
        let certificates = TestCertificates.shared
        let server = try await startServer(
            tls: .server(
                certificateChain: .file(certificates.server.certificatePath),
                privateKey: .file(certificates.server.privateKeyPath)))
        let channel = try makeChannel(ports: [server.port]) { configuration in
            configuration.tls = .client(
                serverName: "localhost", trustRoots: .certificates(.file(certificates.caCertificatePath)))
        }
        let client = Grpc_Testing_TestService.Client(transport: channel)
        let response = try await client.unaryCall(payloadRequest(size: 100, responseSize: 200_000))
        #expect(response.payload.body.count == 200_000)
        await channel.close()

        // A server certificate from another CA is refused.
        let rogue = try makeChannel(ports: [server.port]) { configuration in
            configuration.tls = .client(serverName: "localhost", trustRoots: .systemDefault)
        }
        let refused = await #expect(throws: RPCError.self) {
            _ = try await Grpc_Testing_TestService.Client(transport: rogue).emptyCall(.init())
        }
        #expect(refused?.code == .unavailable)
        await rogue.close()
        await server.shutdown()
    }

    @Test func keepalivePingsFollowTheConfiguration() async throws {
        func sleepCall(on channel: RPCChannel) async throws {
            let _: UnaryResponse<Google_Protobuf_Empty> = try await channel.unary(
                ProbeService.sleep, Google_Protobuf_Int64Value(700), options: CallOptions())
        }
        // A server that allows a ping every 10 ms with calls active: pinging every 50 ms is fine.
        let lenient = try await startServer { $0.keepalive.minPingIntervalWithCalls = .milliseconds(10) }
        let pinging = try makeChannel(ports: [lenient.port]) { $0.keepalive = .init(interval: .milliseconds(50)) }
        try await sleepCall(on: pinging)
        await pinging.close()
        await lenient.shutdown()

        // gRPC's default policy (one ping per 5 minutes): the same client earns GOAWAY too_many_pings, which ends
        // the connection and its call. Proof that pings go out on the configured interval.
        let strict = try await startServer()
        let tooEager = try makeChannel(ports: [strict.port]) { $0.keepalive = .init(interval: .milliseconds(50)) }
        let punished = await #expect(throws: RPCError.self) { try await sleepCall(on: tooEager) }
        #expect(punished?.code == .unavailable)
        await tooEager.close()

        // Without keepalive configured (the default) no ping is sent: the call succeeds on the strict server.
        let quiet = try makeChannel(ports: [strict.port])
        try await sleepCall(on: quiet)
        await quiet.close()
        await strict.shutdown()
    }

    @Test func memoryStaysBoundedOverManyCalls() async throws {
        let server = try await startServer()
        let channel = try makeChannel(ports: [server.port])
        let client = Grpc_Testing_TestService.Client(transport: channel)
        let request = payloadRequest(size: 100, responseSize: 100)
        func concurrentRound() async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<1_000 { group.addTask { _ = try await client.unaryCall(request) } }
                try await group.waitForAll()
            }
        }
        // Warm up: pools, caches and the allocator's arenas reach their working size.
        for _ in 0..<1_000 { _ = try await client.unaryCall(request) }
        try await concurrentRound()
        let baseline = heldMemoryBytes()

        for _ in 0..<10_000 { _ = try await client.unaryCall(request) }
        let afterSequential = heldMemoryBytes()
        for _ in 0..<3 { try await concurrentRound() }
        let afterConcurrent = heldMemoryBytes()

        // Bound: 24 MiB over the warmed-up baseline, covering both the client's and the in-process server's side.
        let bound = 24 << 20
        print("\(heldMemoryKind): baseline \(baseline >> 20) MiB, after 10,000 sequential \(afterSequential >> 20) MiB,"
            + " after 3 x 1,000 concurrent \(afterConcurrent >> 20) MiB (bound +\(bound >> 20) MiB)")
        #expect(afterSequential - baseline < bound)
        #expect(afterConcurrent - baseline < bound)
        await channel.close()
        await server.shutdown()
    }
}

/// The pure parts: backoff schedule and trace context parsing.
struct ClientPolicyTests {
    @Test func reconnectBackoffFollowsGRPCDefaults() {
        let backoff = RPCChannelConfiguration.ConnectionBackoff()
        for _ in 0..<50 {
            let first = backoff.delay(afterFailures: 1)
            #expect(first >= .milliseconds(800) && first <= .milliseconds(1200))
            let second = backoff.delay(afterFailures: 2)
            #expect(second >= .milliseconds(1280) && second <= .milliseconds(1920))
            let late = backoff.delay(afterFailures: 40)
            #expect(late >= .seconds(96) && late <= .seconds(144))
        }
    }

    @Test func traceparentParsing() {
        let valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        #expect(TraceContext(traceparent: valid)?.traceparent == valid)
        #expect(TraceContext(traceparent: "00-00000000000000000000000000000000-b7ad6b7169203331-01") == nil)
        #expect(TraceContext(traceparent: "garbage") == nil)
        let root = TraceContext.newRoot()
        #expect(TraceContext(traceparent: root.traceparent) == root)
    }

    @Test func grpcTimeoutRoundsUp() {
        #expect(GRPCTimeout.format(.milliseconds(300)) == "300000u")
        #expect(GRPCTimeout.parse(GRPCTimeout.format(.seconds(2)))! >= .seconds(2))
    }
}
