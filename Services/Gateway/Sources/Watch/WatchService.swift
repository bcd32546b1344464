internal import Foundation
internal import HabitFlowGatewayProtos
internal import HabitFlowRPC
internal import Logging

/// `GatewayService/WatchChanges`: the caller's changes in habits, goals and social, pushed as they commit.
///
/// A stream registers a ``Watcher`` in the ``WatchHub`` and leases its user's notices (``WatchLeases``) first, then
/// catches up: every feed starts marked, so the stream reads each service's `ListChanges` from the client's cursor
/// (page after page while `has_more`), sending each non-empty page as a `changes` event with the cursor after it,
/// then a `caught_up` heartbeat. From then on a change notice for the user marks the feed again and the same read
/// sends what is new. Registering before the first read means a change that commits during the catch-up is read
/// again rather than missed; a read from a cursor returns only what came after it, so nothing is sent twice. A feed
/// whose service cannot be read is tried again every ``retryDelay`` (the stream stays open; heartbeats go on). The
/// watchers of one user at the same cursor share their reads (``SharedReads``): a check-in seen by ten devices costs
/// one `ListChanges`, not ten.
///
/// A write that stays blocked (the client stopped reading: HTTP/2 flow control) for ``Settings/slowClientTimeout``
/// ends the stream `RESOURCE_EXHAUSTED`: nothing is buffered for a slow client, which resumes from its last cursor.
struct WatchService: Sendable {
    struct Settings: Sendable {
        /// A heartbeat is sent when nothing else was for this long.
        var heartbeatInterval: Duration
        /// How long one write may wait for the client to read.
        var slowClientTimeout: Duration
        /// The deadline of each `ListChanges` read.
        var readTimeout: Duration
    }

    /// Feeds by ``ChangeFeedSource`` raw value.
    let feeds: [ChangeFeed]
    let hub: WatchHub
    let leases: WatchLeases
    let reads = SharedReads()
    let settings: Settings
    let logger: Logger

    /// The identity the gateway's notice subscriptions are signed with (services refuse `ChangeNotices` to calls
    /// signed `gateway`, which is what a client's forwarded call carries).
    static let caller = "gateway-watch"
    static let retryDelay: Duration = .seconds(1)

    init(feeds: [ChangeFeed], hub: WatchHub, leases: WatchLeases, settings: Settings, logger: Logger) {
        precondition(feeds.map(\.source) == ChangeFeedSource.allCases, "one feed per source, in order")
        self.feeds = feeds
        self.hub = hub
        self.leases = leases
        self.settings = settings
        self.logger = logger
    }

    func watchChanges(
        request: Habitflow_Gateway_V1_WatchChangesRequest,
        responses: ResponseWriter<Habitflow_Gateway_V1_WatchChangesResponse>, context: ServerContext
    ) async throws {
        guard let info = GatewayCallInfo.current, let caller = info.caller else {
            throw RPCError.unauthenticated(reason: "TOKEN_MISSING", "WatchChanges needs a signed-in user")
        }
        var cursor = try WatchCursor(parsing: request.cursor)
        let watcher = Watcher(userID: caller.userID)
        try hub.register(watcher)
        defer { hub.unregister(watcher) }
        // The services notify only leased users; with the lease taken first, the catch-up below misses nothing.
        await leases.lease(caller.userID)
        let options = CallOptions.onBehalf(of: caller, info: info, timeout: settings.readTimeout)

        var caughtUp = false
        var lastSent = ContinuousClock.now
        var failed: Set<ChangeFeedSource> = []
        while true {
            try Task.checkCancellation()
            let taken = ContinuousClock.Instant.now
            let marked = Set(try watcher.take()).union(failed)
            failed = []
            for source in ChangeFeedSource.allCases where marked.contains(source) {
                var more = true
                while more {
                    let page: ChangeFeed.Page
                    do {
                        let feed = feeds[source.rawValue]
                        let position = cursor[source]
                        page = try await reads.page(
                            .init(userID: caller.userID, source: source, cursor: position), notBefore: taken
                        ) { try await feed.list(position, options) }
                    } catch let error as RPCError where error.code == .invalidArgument {
                        // The only argument is the cursor: its part for this feed was not one the feed gave.
                        throw WatchCursor.invalid
                    } catch {
                        try Task.checkCancellation()
                        logger.warning(
                            "watcher cannot read a change feed; retrying",
                            metadata: ["service": "\(source.name)", "error": "\(error)", "request_id": "\(info.requestID)"])
                        failed.insert(source)
                        break
                    }
                    cursor[source] = page.nextCursor
                    more = page.hasMore
                    if page.count > 0 {
                        try await send(
                            .with {
                                $0.changes = .with {
                                    $0.source = source.proto
                                    $0.listChanges = page.listChanges
                                }
                                $0.cursor = cursor.token
                            }, to: responses)
                        lastSent = .now
                    }
                }
            }
            if (!caughtUp && failed.isEmpty) || ContinuousClock.now - lastSent >= settings.heartbeatInterval {
                try await send(
                    .with {
                        $0.heartbeat.caughtUp = !caughtUp && failed.isEmpty
                        $0.cursor = cursor.token
                    }, to: responses)
                caughtUp = caughtUp || failed.isEmpty
                lastSent = .now
            }
            let untilHeartbeat = settings.heartbeatInterval - (ContinuousClock.now - lastSent)
            await watcher.wakeup.wait(timeout: failed.isEmpty ? untilHeartbeat : min(untilHeartbeat, Self.retryDelay))
        }
    }

    /// Writes `message`, or ends the stream `RESOURCE_EXHAUSTED` when the client has not taken it within the slow
    /// client timeout (the write is cancelled: nothing stays queued for it).
    private func send(
        _ message: Habitflow_Gateway_V1_WatchChangesResponse,
        to responses: ResponseWriter<Habitflow_Gateway_V1_WatchChangesResponse>
    ) async throws {
        let timeout = settings.slowClientTimeout
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await responses.write(message) }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw RPCError(
                    .resourceExhausted,
                    "watcher too slow: the client read nothing for \(timeout); call WatchChanges again with the last cursor")
            }
            try await group.next()
            group.cancelAll()
        }
    }
}
