import Foundation
import HabitFlowEvents
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import NIOCore
import NIOPosix
import Synchronization

@testable import HabitFlowAuth

/// A mail server for tests (the one mock the rules allow): speaks enough SMTP on loopback to accept mail and
/// records what arrives; it can also misbehave in the ways a client must survive.
final class FakeSMTPServer: Sendable {
    enum Behavior: Sendable {
        case accept
        /// `550` to every `RCPT TO`.
        case rejectRecipients
        /// `421` to `DATA` (a transient failure).
        case deferData
        /// Greets, then closes the connection.
        case hangUpAfterGreeting
        /// Accepts the connection and never says anything.
        case silent
    }

    struct Received: Sendable {
        var from: String
        var recipients: [String]
        /// The message as sent (headers and body, CRLF line ends), dot-stuffing undone.
        var data: String
        var ehlo: String
    }

    let port: Int
    private let server: NIOAsyncChannel<NIOAsyncChannel<String, ByteBuffer>, Never>
    private let accepting: Task<Void, Never>
    private let state: SMTPState

    private final class SMTPState: Sendable {
        let received = Mutex<[Received]>([])
        let behavior: Mutex<Behavior>
        let connections = Mutex(0)
        init(_ behavior: Behavior) { self.behavior = Mutex(behavior) }
    }

    private init(
        port: Int, server: NIOAsyncChannel<NIOAsyncChannel<String, ByteBuffer>, Never>, accepting: Task<Void, Never>,
        state: SMTPState
    ) {
        self.port = port
        self.server = server
        self.accepting = accepting
        self.state = state
    }

    static func start(behavior: Behavior = .accept) async throws -> FakeSMTPServer {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(SMTPLineDecoder()))
                    return try NIOAsyncChannel<String, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let state = SMTPState(behavior)
        let accepting = Task<Void, Never> {
            _ = try? await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        group.addTask { await Self.serve(connection, state: state) }
                    }
                }
            }
        }
        guard let port = server.channel.localAddress?.port else {
            throw SMTPError(code: 0, reply: "no port", command: "bind")
        }
        return FakeSMTPServer(port: port, server: server, accepting: accepting, state: state)
    }

    func stop() async {
        try? await server.channel.close()
        accepting.cancel()
        await accepting.value
    }

    var received: [Received] { state.received.withLock { $0 } }
    var connectionCount: Int { state.connections.withLock { $0 } }

    func setBehavior(_ behavior: Behavior) { state.behavior.withLock { $0 = behavior } }

    /// The messages (headers and body) delivered to `recipient`, oldest first.
    func messages(to recipient: String) -> [String] {
        received.filter { $0.recipients.contains(recipient.lowercased()) }.map(\.data)
    }

    private static func serve(_ connection: NIOAsyncChannel<String, ByteBuffer>, state: SMTPState) async {
        state.connections.withLock { $0 += 1 }
        let behavior = state.behavior.withLock { $0 }
        try? await connection.executeThenClose { lines, out in
            func reply(_ text: String) async throws { try await out.write(ByteBuffer(string: text + "\r\n")) }
            if behavior == .silent {
                for try await _ in lines {}
                return
            }
            try await reply("220 fake.test ESMTP ready")
            if behavior == .hangUpAfterGreeting { return }
            var mail = Received(from: "", recipients: [], data: "", ehlo: "")
            var iterator = lines.makeAsyncIterator()
            while let line = try await iterator.next() {
                let verb = line.prefix(4).uppercased()
                switch verb {
                case "EHLO", "HELO":
                    mail.ehlo = String(line.dropFirst(5))
                    try await reply("250-fake.test greets you")
                    try await reply("250-8BITMIME")
                    try await reply("250 SIZE 1000000")
                case "MAIL":
                    mail.from = envelopeAddress(line)
                    try await reply("250 2.1.0 OK")
                case "RCPT":
                    if behavior == .rejectRecipients {
                        try await reply("550 5.1.1 no such mailbox")
                    } else {
                        mail.recipients.append(envelopeAddress(line).lowercased())
                        try await reply("250 2.1.5 OK")
                    }
                case "DATA":
                    if behavior == .deferData {
                        try await reply("421 4.3.2 try again later")
                        continue
                    }
                    try await reply("354 end with <CRLF>.<CRLF>")
                    var data: [String] = []
                    while let dataLine = try await iterator.next(), dataLine != "." {
                        data.append(dataLine.hasPrefix("..") ? String(dataLine.dropFirst()) : dataLine)
                    }
                    mail.data = data.joined(separator: "\r\n")
                    let delivered = mail
                    state.received.withLock { $0.append(delivered) }
                    mail = Received(from: "", recipients: [], data: "", ehlo: mail.ehlo)
                    try await reply("250 2.0.0 queued")
                case "QUIT":
                    try await reply("221 2.0.0 bye")
                    return
                default:
                    try await reply("502 5.5.2 command not recognized")
                }
            }
        }
    }

    private static func envelopeAddress(_ line: String) -> String {
        guard let open = line.firstIndex(of: "<"), let close = line.lastIndex(of: ">"), open < close else { return "" }
        return String(line[line.index(after: open)..<close])
    }
}

/// Stands in for the habits, goals and social services: an `EventSubscriber` behind the internal-credential check
/// that records every event the auth outbox relay delivers.
final class EventRecorder: Sendable {
    private let host: ServiceHost
    private let delivered: Shared<[Habitflow_Events_V1_EventEnvelope]>

    var port: Int { host.port }

    private init(host: ServiceHost, delivered: Shared<[Habitflow_Events_V1_EventEnvelope]>) {
        self.host = host
        self.delivered = delivered
    }

    static func start() async throws -> EventRecorder {
        let delivered = Shared<[Habitflow_Events_V1_EventEnvelope]>([])
        let definition = ServiceDefinition(name: "event-recorder") { _ in [RecordingSubscriber(delivered: delivered)] }
        let configuration = ServiceConfiguration(
            service: "event-recorder", port: 0, databaseURL: nil, sqlDirectory: TestEnvironment.sqlRoot,
            internalSecret: testInternalSecret)
        let host = try await ServiceHost.start(definition, configuration: configuration, logger: testLogger)
        return EventRecorder(host: host, delivered: delivered)
    }

    func stop() async { await host.shutdown() }

    /// Events about `userID` of type `type` (a full name such as `habitflow.events.v1.UserDeleted`).
    func events(_ type: String, aggregateID userID: String) -> [Habitflow_Events_V1_EventEnvelope] {
        delivered.value.filter { $0.type == type && $0.aggregateID == userID }
    }
}

private struct RecordingSubscriber: Habitflow_Events_V1_EventSubscriber.Handler {
    let delivered: Shared<[Habitflow_Events_V1_EventEnvelope]>

    func deliver(request: Habitflow_Events_V1_DeliverEventRequest, context: ServerContext) async throws
        -> Habitflow_Events_V1_DeliverEventResponse
    {
        delivered.update { $0.append(request.event) }
        var response = Habitflow_Events_V1_DeliverEventResponse()
        response.applied = true
        return response
    }
}
