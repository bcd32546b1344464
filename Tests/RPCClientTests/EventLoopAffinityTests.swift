import HabitFlowRPC
import HabitFlowRPCClient
import NIOPosix
import SwiftProtobuf
import Testing

@Suite("event-loop affinity")
struct EventLoopAffinityTests {
    @Test("a caller running on an event loop gets its calls placed on that loop's connection to the target")
    func callsStayOnTheCallersLoop() async throws {
        let server = try await startServer()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var configuration = RPCChannelConfiguration(targets: [.init(host: "127.0.0.1", port: server.port)])
        configuration.connectionsPerTarget = 2
        let channel = try RPCChannel(configuration: configuration, group: group, logger: quietLogger)

        @Sendable func peer() async throws -> String {
            try await channel.unary(ProbeService.peer, Google_Protobuf_Empty(), options: CallOptions(), responseType: Google_Protobuf_StringValue.self).message.value
        }
        // Both connections up: unpinned calls alternate between them.
        var seen = Set<String>()
        for _ in 0..<20 where seen.count < 2 {
            seen.insert(try await peer())
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(seen.count == 2)

        var peersByLoop: [Set<String>] = []
        for loop in group.makeIterator() {
            let peers = try await Task(executorPreference: EventLoopTaskExecutor(eventLoop: loop)) {
                var peers = Set<String>()
                for _ in 0..<10 { peers.insert(try await peer()) }
                return peers
            }.value
            peersByLoop.append(peers)
        }
        #expect(peersByLoop.map(\.count) == [1, 1])
        #expect(peersByLoop[0] != peersByLoop[1])

        await channel.close()
        await server.shutdown()
        try await group.shutdownGracefully()
    }
}
