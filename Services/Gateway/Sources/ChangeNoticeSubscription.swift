internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowRPC
internal import Logging

/// One service's `ChangeNotices/WatchChangedUsers` stream, kept open for as long as ``follow(logger:onNotice:onEnded:)``
/// runs: the watchers' feeds (``ChangeFeed``) and the session checks (``SessionChecker``) both follow one, through
/// this one reconnect loop.
struct ChangeNoticeSubscription: Sendable {
    /// The service, for logs.
    let service: String
    /// Opens the stream.
    let open: @Sendable () async throws -> ResponseStream<Habitflow_Events_V1_ChangedUsers>

    init(service: String, client: Habitflow_Events_V1_ChangeNotices.Client) {
        self.service = service
        self.open = { try await client.watchChangedUsers(Habitflow_Events_V1_WatchChangedUsersRequest()) }
    }

    /// Hands every notice to `onNotice`, opening the stream again (with a capped backoff) whenever it ends, until the
    /// task is cancelled. Each stream starts with `all_users`; `onEnded` runs whenever a stream ends or cannot be
    /// opened, since notices sent until the next one opens are lost.
    func follow(
        logger: Logger, onNotice: (Habitflow_Events_V1_ChangedUsers) -> Void, onEnded: () -> Void = {}
    ) async {
        var delay = Self.initialRetryDelay
        while !Task.isCancelled {
            do {
                for try await notice in try await open() {
                    delay = Self.initialRetryDelay
                    onNotice(notice)
                }
                onEnded()
                logger.debug("change notices ended; subscribing again", metadata: ["service": "\(service)"])
            } catch {
                onEnded()
                if Task.isCancelled { return }
                logger.warning(
                    "change notices failed; subscribing again", metadata: ["service": "\(service)", "error": "\(error)"])
            }
            // Jittered, so gateways that lost the same service do not all come back at the same instant.
            try? await Task.sleep(for: delay * Double.random(in: 0.75...1.25))
            delay = min(delay * 2, Self.maximumRetryDelay)
        }
    }

    static let initialRetryDelay: Duration = .milliseconds(100)
    static let maximumRetryDelay: Duration = .seconds(5)
}
