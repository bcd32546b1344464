internal import Foundation
public import Logging

/// The local stack's "mail server": writes each mail as a file (`<milliseconds since 1970>-<id>.eml`, readable by
/// its owner only) into a folder, so a developer can copy a reset or confirmation token from it. The log says only
/// which file: no address or token reaches a log line.
///
/// - Important: the folder holds live tokens. Only for a local stack: configure SMTP everywhere else.
public struct MailDropTransport: MailTransport {
    public let folder: String
    private let logger: Logger

    public init(folder: String, logger: Logger) {
        self.folder = folder
        self.logger = logger
    }

    public func send(_ message: MailMessage) async throws {
        let files = FileManager.default
        try files.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let milliseconds = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let path = URL(fileURLWithPath: folder).appendingPathComponent(
            "\(milliseconds)-\(UUID().uuidString.lowercased()).eml"
        ).path
        let text = """
            From: \(message.from)\r
            To: \(message.to)\r
            Subject: \(message.subject)\r
            Content-Type: text/plain; charset=utf-8\r
            \r
            \(message.body)
            """
        guard files.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        logger.notice("mail written to a file (no SMTP configured)", metadata: ["file": "\(path)"])
    }
}

/// Sends the mail outbox (`mail_outbox`) through a ``MailTransport``: woken when this process enqueues mail and
/// polling for what other replicas enqueued; failed mail is retried with exponential backoff and dropped after
/// ``maximumAttempts``.
final class MailDispatcher: Sendable {
    static let maximumAttempts = 8

    private let store: AuthStore
    private let transport: any MailTransport
    private let sender: String
    private let clock: any AuthClock
    private let logger: Logger
    private let pollInterval: Duration
    private let wakeups: AsyncStream<Void>
    private let wakeupContinuation: AsyncStream<Void>.Continuation

    init(
        store: AuthStore, transport: any MailTransport, sender: String, clock: any AuthClock, logger: Logger,
        pollInterval: Duration
    ) {
        self.store = store
        self.transport = transport
        self.sender = sender
        self.clock = clock
        self.logger = logger
        self.pollInterval = pollInterval
        (wakeups, wakeupContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a pass soon (after a transaction that enqueued mail committed).
    func wake() {
        wakeupContinuation.yield()
    }

    /// Sends until the task is cancelled.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            // A ticker turns the poll interval into wake-ups, so one loop below serves both.
            group.addTask { [pollInterval, wakeupContinuation] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: pollInterval)
                    wakeupContinuation.yield()
                }
            }
            group.addTask { [self] in
                await sendDue()
                for await _ in wakeups {
                    if Task.isCancelled { break }
                    await sendDue()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// One pass: claims due mail and sends it, until none is left.
    func sendDue() async {
        do {
            while !Task.isCancelled {
                let batch = try await store.claimDueMail(now: clock.now(), lease: .seconds(120), limit: 20)
                if batch.isEmpty { return }
                for mail in batch { try await deliver(mail) }
            }
        } catch is CancellationError {
            return
        } catch {
            logger.warning("mail outbox pass failed", metadata: ["error": "\(error)"])
        }
    }

    private func deliver(_ mail: OutgoingMail) async throws {
        do {
            try await transport.send(
                MailMessage(from: sender, to: mail.recipient, subject: mail.subject, body: mail.body))
            try await store.deleteMail(id: mail.id)
        } catch let error as CancellationError {
            throw error
        } catch {
            let attempts = mail.attempts + 1
            if attempts >= Self.maximumAttempts {
                logger.error(
                    "giving up on a mail",
                    metadata: ["mail_id": "\(mail.id)", "attempts": "\(attempts)", "error": "\(error)"])
                try await store.deleteMail(id: mail.id)
                return
            }
            let delay = min(30.0 * pow(2.0, Double(attempts - 1)), 3600)
            logger.warning(
                "mail delivery failed; will retry",
                metadata: [
                    "mail_id": "\(mail.id)", "attempts": "\(attempts)", "retry_in_s": "\(Int(delay))",
                    "error": "\(error)",
                ])
            try await store.recordMailFailure(
                id: mail.id, error: "\(error)", retryAt: clock.now().addingTimeInterval(delay))
        }
    }
}
