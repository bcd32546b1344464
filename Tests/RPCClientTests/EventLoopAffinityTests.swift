import HabitFlowHTTP2
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

        // Both connections up: unpinned calls alternate between them.
        #expect(try await connectedPeers(channel, expected: 2) == 2)
        let peersByLoop = try await peersSeenFromEachLoop(of: group, through: channel, calls: 10)
        #expect(peersByLoop.map(\.count) == [1, 1])
        #expect(peersByLoop[0] != peersByLoop[1])

        await channel.close()
        await server.shutdown()
        try await group.shutdownGracefully()
    }

    @Test("with a connection per loop, every loop has one to each of several targets")
    func everyLoopHasAConnectionToEachTarget() async throws {
        let servers = [try await startServer(name: "first"), try await startServer(name: "second")]
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var configuration = RPCChannelConfiguration(targets: servers.map { .init(host: "127.0.0.1", port: $0.port) })
        configuration.connectionsPerTarget = 2
        let channel = try RPCChannel(configuration: configuration, group: group, logger: quietLogger)

        #expect(try await connectedPeers(channel, expected: 4) == 4)
        // Each call from a loop goes to the picked target's connection on that loop: two peers per loop, four in all.
        let peersByLoop = try await peersSeenFromEachLoop(of: group, through: channel, calls: 20)
        #expect(peersByLoop.map(\.count) == [2, 2])
        #expect(peersByLoop[0].isDisjoint(with: peersByLoop[1]))

        await channel.close()
        for server in servers { await server.shutdown() }
        try await group.shutdownGracefully()
    }
}

/// The client address the server saw: one per connection.
private func peer(through channel: RPCChannel) async throws -> String {
    try await channel.unary(
        ProbeService.peer, Google_Protobuf_Empty(), options: CallOptions(), responseType: Google_Protobuf_StringValue.self
    ).message.value
}

/// Calls from outside the loops (round-robin over the ready connections) until `expected` connections answered, or
/// a second went by; returns how many did.
private func connectedPeers(_ channel: RPCChannel, expected: Int) async throws -> Int {
    var seen = Set<String>()
    for _ in 0..<50 where seen.count < expected {
        seen.insert(try await peer(through: channel))
        try await Task.sleep(for: .milliseconds(20))
    }
    return seen.count
}

/// The connections that `calls` calls from a task on each loop of `group` went to, loop by loop.
private func peersSeenFromEachLoop(
    of group: MultiThreadedEventLoopGroup, through channel: RPCChannel, calls: Int
) async throws -> [Set<String>] {
    var peersByLoop: [Set<String>] = []
    for loop in group.makeIterator() {
        let peers = try await Task(executorPreference: EventLoopTaskExecutor(eventLoop: loop)) {
            var peers = Set<String>()
            for _ in 0..<calls { peers.insert(try await peer(through: channel)) }
            return peers
        }.value
        peersByLoop.append(peers)
    }
    return peersByLoop
}
