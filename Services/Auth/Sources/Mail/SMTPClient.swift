internal import Foundation
internal import HabitFlowBase64
public import NIOCore
public import NIOPosix
internal import HabitFlowCrypto

/// One mail: a plain-text message to one recipient.
public struct MailMessage: Sendable, Hashable {
    /// The sender, as an address or `Name <address>`.
    public var from: String
    /// The recipient's address.
    public var to: String
    public var subject: String
    public var body: String

    public init(from: String, to: String, subject: String, body: String) {
        self.from = from
        self.to = to
        self.subject = subject
        self.body = body
    }
}

/// Delivers mail somewhere: over SMTP, or into the log on a local stack.
public protocol MailTransport: Sendable {
    func send(_ message: MailMessage) async throws
}

/// Where and how to reach an SMTP relay.
public struct SMTPConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// The name the client gives in `EHLO`.
    public var heloName = "habitflow-auth"
    /// The longest a whole delivery (connect to `QUIT`) may take.
    public var timeout: Duration = .seconds(30)

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}

/// A reply the SMTP server sent where another was expected.
public struct SMTPError: Error, CustomStringConvertible, Sendable {
    /// The reply code (0 when the connection ended or a reply could not be read).
    public var code: Int
    public var reply: String
    /// The command that got the reply.
    public var command: String

    /// 4xx replies are worth another try later; 5xx are not.
    public var isTransient: Bool { code == 0 || (400..<500).contains(code) }

    public var description: String { "SMTP \(command): \(code) \(reply)" }
}

/// A minimal SMTP client (RFC 5321) on SwiftNIO: one connection per mail, `EHLO`, `MAIL FROM`, `RCPT TO`, `DATA`,
/// `QUIT`.
///
/// - Important: plain SMTP without STARTTLS or authentication: meant for a relay on loopback or a trusted private
///   network (a local Postfix or a sidecar that holds the provider's credentials and speaks TLS onwards).
public struct SMTPMailTransport: MailTransport {
    public let configuration: SMTPConfiguration
    private let group: any EventLoopGroup

    public init(configuration: SMTPConfiguration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.configuration = configuration
        self.group = group
    }

    public func send(_ message: MailMessage) async throws {
        let envelopeFrom = try SMTPText.address(in: message.from)
        let envelopeTo = try SMTPText.address(in: message.to)
        let data = SMTPText.dotStuffed(SMTPText.render(message, date: Date(), heloName: configuration.heloName))
        do {
            try await deliver(data, from: envelopeFrom, to: envelopeTo)
        } catch let error as SMTPError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // Refused, reset or closed connections: worth another try later, like a 4xx reply.
            throw SMTPError(code: 0, reply: "\(error)", command: "connection")
        }
    }

    private func deliver(_ data: String, from envelopeFrom: String, to envelopeTo: String) async throws {
        try await withDeadline(configuration.timeout) {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(.seconds(10))
                .connect(host: configuration.host, port: configuration.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(SMTPLineDecoder()))
                        return try NIOAsyncChannel<String, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            try await channel.executeThenClose { inbound, outbound in
                var session = SMTPSession(lines: inbound.makeAsyncIterator(), outbound: outbound)
                try await session.expect(220, after: "connect")
                try await session.command("EHLO \(configuration.heloName)", expecting: [250])
                try await session.command("MAIL FROM:<\(envelopeFrom)>", expecting: [250])
                try await session.command("RCPT TO:<\(envelopeTo)>", expecting: [250, 251])
                try await session.command("DATA", expecting: [354])
                try await session.send(data)
                try await session.expect(250, after: "end of data")
                // The mail is accepted; a failing QUIT changes nothing.
                try? await session.command("QUIT", expecting: [221])
            }
        }
    }
}

/// One SMTP conversation: commands out, (possibly multi-line) replies in.
private struct SMTPSession {
    var lines: NIOAsyncChannelInboundStream<String>.AsyncIterator
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

    mutating func command(_ line: String, expecting codes: Set<Int>) async throws {
        try await send(line + "\r\n")
        let (code, reply) = try await readReply(after: line)
        guard codes.contains(code) else {
            throw SMTPError(code: code, reply: reply, command: String(line.prefix { $0 != ":" && $0 != " " }))
        }
    }

    mutating func expect(_ expected: Int, after step: String) async throws {
        let (code, reply) = try await readReply(after: step)
        guard code == expected else { throw SMTPError(code: code, reply: reply, command: step) }
    }

    func send(_ text: String) async throws {
        try await outbound.write(ByteBuffer(string: text))
    }

    /// Reads lines up to the last of a reply ("250-..." continues, "250 ..." ends it).
    private mutating func readReply(after step: String) async throws -> (Int, String) {
        var text: [String] = []
        while let line = try await lines.next() {
            let bytes = Array(line.utf8)
            guard bytes.count >= 3, let code = Int(String(decoding: bytes.prefix(3), as: UTF8.self)) else {
                throw SMTPError(code: 0, reply: "malformed reply: \(line.prefix(100))", command: step)
            }
            text.append(String(line.dropFirst(4)))
            if bytes.count == 3 || bytes[3] != UInt8(ascii: "-") { return (code, text.joined(separator: " ")) }
        }
        throw SMTPError(code: 0, reply: "the server closed the connection", command: step)
    }
}

/// Splits the server's byte stream into lines (CRLF or LF), refusing absurdly long ones.
struct SMTPLineDecoder: ByteToMessageDecoder {
    typealias InboundOut = String
    static let maximumLineLength = 4096

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            if buffer.readableBytes > Self.maximumLineLength {
                throw SMTPError(code: 0, reply: "reply line too long", command: "read")
            }
            return .needMoreData
        }
        let length = newline - buffer.readerIndex
        var line = buffer.readString(length: length) ?? ""
        buffer.moveReaderIndex(forwardBy: 1)
        if line.hasSuffix("\r") { line.removeLast() }
        context.fireChannelRead(wrapInboundOut(line))
        return .continue
    }
}

/// Formatting a message for the wire.
enum SMTPText {
    /// The bare address inside `Name <address>` (or the whole text). CR, LF and angle brackets inside are refused, so
    /// nothing can be smuggled into a command.
    static func address(in text: String) throws -> String {
        var address = text
        if let open = text.lastIndex(of: "<"), let close = text.lastIndex(of: ">"), open < close {
            address = String(text[text.index(after: open)..<close])
        }
        guard !address.isEmpty,
            address.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") })
        else {
            throw SMTPError(code: 0, reply: "not a deliverable address", command: "address")
        }
        return address
    }

    /// Headers and body, CRLF line ends. A non-ASCII subject is RFC 2047 encoded and a non-ASCII body base64.
    static func render(_ message: MailMessage, date: Date, heloName: String) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        let body = message.body.replacingOccurrences(of: "\r\n", with: "\n").split(
            separator: "\n", omittingEmptySubsequences: false)
        let plain = message.body.utf8.allSatisfy { $0 < 0x80 } && body.allSatisfy { $0.utf8.count <= 998 }
        var lines = [
            "From: \(headerSafe(message.from))",
            "To: <\(headerSafe(message.to))>",
            "Subject: \(encodedHeader(message.subject))",
            "Date: \(formatter.string(from: date))",
            "Message-ID: <\(UUID.random().lowercasedString)@\(heloName)>",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: \(plain ? "7bit" : "base64")",
            "",
        ]
        if plain {
            lines += body.map(String.init)
        } else {
            let encoded = Base64.encode(Array(message.body.utf8))
            var index = encoded.startIndex
            while index < encoded.endIndex {
                let end = encoded.index(index, offsetBy: 76, limitedBy: encoded.endIndex) ?? encoded.endIndex
                lines.append(String(encoded[index..<end]))
                index = end
            }
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// The DATA payload: lines starting with '.' get another '.', and the terminating "." line is added.
    static func dotStuffed(_ rendered: String) -> String {
        let lines = rendered.components(separatedBy: "\r\n")
        let stuffed = lines.dropLast().map { $0.hasPrefix(".") ? "." + $0 : $0 }
        return stuffed.joined(separator: "\r\n") + "\r\n.\r\n"
    }

    private static func headerSafe(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0 != "\r" && $0 != "\n" })
    }

    private static func encodedHeader(_ text: String) -> String {
        let text = headerSafe(text)
        guard text.utf8.contains(where: { $0 >= 0x80 }) else { return text }
        return "=?UTF-8?B?\(Base64.encode(Array(text.utf8)))?="
    }
}

/// Runs `body`, cancelling it and throwing when `timeout` passes first.
func withDeadline<Result: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> Result)
    async throws -> Result
{
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else {
            throw SMTPError(code: 0, reply: "no answer within \(timeout)", command: "deliver")
        }
        return result
    }
}
