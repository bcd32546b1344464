internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowGoalsProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowSocialProtos
internal import Logging
internal import SwiftProtobuf

/// What a watcher needs of one service: a page of the user's `ListChanges`, and the service's change notices.
struct ChangeFeed: Sendable {
    struct Page: Sendable {
        /// The service's `ListChangesResponse`, as the watch sends it.
        var listChanges: Google_Protobuf_Any
        var count: Int
        var nextCursor: String
        var hasMore: Bool
    }

    let source: ChangeFeedSource
    /// The page after `cursor`, read with `options` (on the user's behalf).
    let list: @Sendable (_ cursor: String, _ options: CallOptions) async throws -> Page
    /// The service's `ChangeNotices/WatchChangedUsers` stream.
    let notices: ChangeNoticeSubscription
    /// Leases users' change notices in the service (`ChangeNotices/WatchUsers`; see ``WatchLeases``).
    let watchUsers: WatchLeases.Lease

    init<Response: ListChangesPage>(
        _ source: ChangeFeedSource, notices: Habitflow_Events_V1_ChangeNotices.Client,
        list: @escaping @Sendable (_ cursor: String, _ options: CallOptions) async throws -> Response
    ) {
        self.source = source
        self.list = { cursor, options in
            let response = try await list(cursor, options)
            return Page(
                listChanges: try Google_Protobuf_Any(message: response), count: response.changeCount,
                nextCursor: response.nextCursor, hasMore: response.hasMore_p)
        }
        self.notices = ChangeNoticeSubscription(service: source.name, client: notices)
        self.watchUsers = { users in
            let response = try await notices.watchUsers(.with { $0.userIds = users.map(\.uuidString) })
            // Renewing a third of the way through: a service's lease shorter than a few seconds would keep the
            // gateway busy renewing, so it is taken as at least three.
            return .seconds(max(Int(response.leaseSeconds), 3))
        }
    }

    /// Keeps `hub` told of the service's notices for as long as the task runs (one stream per service for the whole
    /// gateway). Each stream starts with `all_users`, which marks every watcher: what changed while no stream was
    /// open is then read too.
    func follow(into hub: WatchHub, logger: Logger) async {
        await notices.follow(logger: logger) { notice in
            if notice.allUsers { hub.changedAll(in: source) }
            hub.changed(notice.userIds.lazy.compactMap(UUID.init(uuidString:)), in: source)
        }
    }
}

/// A service's `ListChangesResponse`.
protocol ListChangesPage: SwiftProtobuf.Message {
    var changeCount: Int { get }
    var nextCursor: String { get }
    /// `has_more` (swift-protobuf adds `_p`: `hasMore` would clash with its own naming of field presence).
    var hasMore_p: Bool { get }
}

extension Habitflow_Habits_V1_ListChangesResponse: ListChangesPage {
    var changeCount: Int { changes.count }
}

extension Habitflow_Goals_V1_ListChangesResponse: ListChangesPage {
    var changeCount: Int { changes.count }
}

extension Habitflow_Social_V1_ListChangesResponse: ListChangesPage {
    var changeCount: Int { changes.count }
}
