import Foundation
import GRPCInteropTesting
import HabitFlowInternalCredential
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import ServiceLifecycle
import Testing

/// The interop TestService whose UnaryCall takes `responseSize` milliseconds, telling the test when it has started.
struct SlowEchoService: RPCService {
    let started: AsyncStream<Void>.Continuation
    let base = InteropTestService()
    var serviceName: String { base.serviceName }
    var methods: [ServerMethod] {
        base.methods.map { method in
            guard method.descriptor.method == "UnaryCall" else { return method }
            let started = self.started
            return .unary(method.descriptor) { (request: Grpc_Testing_SimpleRequest, _: ServerContext) in
                started.yield()
                try await Task.sleep(for: .milliseconds(Int(request.responseSize)))
                var response = Grpc_Testing_SimpleResponse()
                response.username = "finished"
                return response
            }
        }
    }
}

/// A domain error as a service's `Domain/` would throw it, with its status declared in the RPC layer.
enum ExampleDomainError: Error, RPCErrorConvertible {
    case limitReached

    var rpcError: RPCError { .failedPrecondition(type: "EXAMPLE_LIMIT", subject: "examples", "at most 3 examples") }
}

@Suite("Service lifecycle and error mapping")
struct LifecycleTests {
    @Test(
        "a ServiceGroup's graceful shutdown lets the call in flight finish, then the host stops and run() returns",
        .timeLimit(.minutes(1)))
    func gracefulShutdownInAServiceGroup() async throws {
        let (started, startedContinuation) = AsyncStream<Void>.makeStream()
        let definition = ServiceDefinition(name: "slow", descriptorSets: [GRPCInteropTestingDescriptorSet.base64]) { _ in
            [SlowEchoService(started: startedContinuation)]
        }
        let host = try await startHost(definition)
        let port = host.port
        let group = ServiceGroup(services: [host], logger: testLogger)
        let running = Task { try await group.run() }

        let rpc = try channel(to: host, signedWith: "kit-secret")
        let client = Grpc_Testing_TestService.Client(transport: rpc)
        let call = Task {
            try await client.unaryCall(.with { $0.responseSize = 400 }, options: .onBehalf(of: UUID()))
        }
        var iterator = started.makeAsyncIterator()
        _ = await iterator.next()
        let shutdownRequested = ContinuousClock.now
        await group.triggerGracefulShutdown()

        // The call that was running when the shutdown began completes normally.
        #expect(try await call.value.username == "finished")
        try await running.value
        #expect(ContinuousClock.now - shutdownRequested >= .milliseconds(300))
        await rpc.close()

        // Nothing listens any more: a new connection is refused.
        var configuration = RPCChannelConfiguration(host: "127.0.0.1", port: port)
        configuration.connectTimeout = .seconds(1)
        configuration.retry.maxAttempts = 1
        let late = try RPCChannel(configuration: configuration, interceptors: [], logger: testLogger)
        let error = await #expect(throws: RPCError.self) {
            try await Grpc_Testing_TestService.Client(transport: late).emptyCall(
                Grpc_Testing_Empty(), options: CallOptions(timeout: .seconds(2)))
        }
        #expect(error?.code == .unavailable)
        await late.close()
        // shutdown() after the group's shutdown waits for the same one and returns.
        await host.shutdown()
    }

    @Test("a domain error reaches the client as the status its RPCErrorConvertible conformance declares")
    func domainErrorsMapToTheirStatus() {
        let mapping = ErrorMappingServerInterceptor(logger: testLogger)
        let method = MethodDescriptor(service: "habitflow.examples.v1.ExamplesService", method: "CreateExample")
        let mapped = mapping.mapped(ExampleDomainError.limitReached, method: method) as? RPCError
        #expect(mapped?.code == .failedPrecondition)
        #expect(mapped?.message == "at most 3 examples")
        #expect(mapped == ExampleDomainError.limitReached.rpcError)
    }
}
