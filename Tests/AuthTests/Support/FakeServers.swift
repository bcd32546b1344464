import Foundation
import HabitFlowEvents
import HabitFlowLocking
import HabitFlowRPC
import HabitFlowServiceKit
import HabitFlowTestSupport
import NIOCore
import NIOPosix

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
    private let server: any Channel
    private let state: SMTPState

    fileprivate final class SMTPState: Sendable {
        let received = Locked<[Received]>([])
        let behavior: Locked<Behavior>
        let connections = Locked(0)
        init(_ behavior: Behavior) { self.behavior = Locked(behavior) }
    }

    private init(port: Int, server: any Channel, state: SMTPState) {
        self.port = port
        self.server = server
        self.state = state
    }

    /// A plain channel handler per connection, not async channels: a connection the kernel accepted while the
    /// server closes is then simply closed with it.
    static func start(behavior: Behavior = .accept) async throws -> FakeSMTPServer {
        let state = SMTPState(behavior)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(SMTPLineDecoder()))
                    try channel.pipeline.syncOperations.addHandler(FakeSMTPConnection(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = server.localAddress?.port else {
            throw SMTPError(code: 0, reply: "no port", command: "bind")
        }
        return FakeSMTPServer(port: port, server: server, state: state)
    }

    func stop() async {
        try? await server.close()
    }

    var received: [Received] { state.received.withLock { $0 } }
    var connectionCount: Int { state.connections.withLock { $0 } }

    func setBehavior(_ behavior: Behavior) { state.behavior.withLock { $0 = behavior } }

    /// The messages (headers and body) delivered to `recipient`, oldest first.
    func messages(to recipient: String) -> [String] {
        received.filter { $0.recipients.contains(recipient.lowercased()) }.map(\.data)
    }

    /// One SMTP conversation, line by line, on its channel's event loop.
    private final class FakeSMTPConnection: ChannelInboundHandler {
        typealias InboundIn = String
        typealias OutboundOut = ByteBuffer

        private let state: SMTPState
        private var behavior = Behavior.accept
        private var mail = Received(from: "", recipients: [], data: "", ehlo: "")
        /// The message lines while inside DATA.
        private var data: [String]?

        init(state: SMTPState) { self.state = state }

        func channelActive(context: ChannelHandlerContext) {
            state.connections.withLock { $0 += 1 }
            behavior = state.behavior.withLock { $0 }
            switch behavior {
            case .silent: break
            case .hangUpAfterGreeting:
                reply("220 fake.test ESMTP ready", context: context)
                context.close(promise: nil)
            default: reply("220 fake.test ESMTP ready", context: context)
            }
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let line = unwrapInboundIn(data)
            if behavior == .silent { return }
            if var lines = self.data {
                if line == "." {
                    mail.data = lines.joined(separator: "\r\n")
                    let delivered = mail
                    state.received.withLock { $0.append(delivered) }
                    mail = Received(from: "", recipients: [], data: "", ehlo: mail.ehlo)
                    self.data = nil
                    reply("250 2.0.0 queued", context: context)
                } else {
                    lines.append(line.hasPrefix("..") ? String(line.dropFirst()) : line)
                    self.data = lines
                }
                return
            }
            switch line.prefix(4).uppercased() {
            case "EHLO", "HELO":
                mail.ehlo = String(line.dropFirst(5))
                reply("250-fake.test greets you\r\n250-8BITMIME\r\n250 SIZE 1000000", context: context)
            case "MAIL":
                mail.from = Self.envelopeAddress(line)
                reply("250 2.1.0 OK", context: context)
            case "RCPT" where behavior == .rejectRecipients:
                reply("550 5.1.1 no such mailbox", context: context)
            case "RCPT":
                mail.recipients.append(Self.envelopeAddress(line).lowercased())
                reply("250 2.1.5 OK", context: context)
            case "DATA" where behavior == .deferData:
                reply("421 4.3.2 try again later", context: context)
            case "DATA":
                self.data = []
                reply("354 end with <CRLF>.<CRLF>", context: context)
            case "QUIT":
                reply("221 2.0.0 bye", context: context)
                context.close(promise: nil)
            default:
                reply("502 5.5.2 command not recognized", context: context)
            }
        }

        private func reply(_ text: String, context: ChannelHandlerContext) {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text + "\r\n")), promise: nil)
        }

        private static func envelopeAddress(_ line: String) -> String {
            guard let open = line.firstIndex(of: "<"), let close = line.lastIndex(of: ">"), open < close else {
                return ""
            }
            return String(line[line.index(after: open)..<close])
        }
    }
}

/// Stands in for the services auth's events go to (habits): an `EventSubscriber` behind the internal-credential check
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
