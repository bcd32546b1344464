internal import HabitFlowGatewayProtos
internal import HabitFlowRPC
internal import HabitFlowServiceAPI

/// One of the change feeds a watcher follows: each service with a `ListChanges` and `ChangeNotices`.
enum ChangeFeedSource: Int, CaseIterable, Sendable {
    case habits = 0, goals = 1, social = 2

    var name: String {
        switch self {
        case .habits: "habits"
        case .goals: "goals"
        case .social: "social"
        }
    }

    var proto: Habitflow_Gateway_V1_ChangeSource {
        switch self {
        case .habits: .habits
        case .goals: .goals
        case .social: .social
        }
    }
}

/// `WatchChanges`' cursor: the `ListChanges` cursor of each feed, in one opaque string (a ``PageToken`` of the list
/// `watch`, so a damaged or foreign one is recognised). An empty string stands for the beginning of every feed.
struct WatchCursor: Sendable, Hashable {
    /// By ``ChangeFeedSource`` raw value; `""` is the feed's beginning.
    private(set) var feeds = Array(repeating: "", count: ChangeFeedSource.allCases.count)

    static let list = "watch"

    init() {}

    /// `INVALID_ARGUMENT` with a `BadRequest` on `cursor` unless `token` is empty or one ``token`` made.
    init(parsing token: String) throws(RPCError) {
        guard !token.isEmpty else { return }
        guard let fields = PageToken.decode(token, list: Self.list), fields.count == feeds.count else {
            throw Self.invalid
        }
        feeds = fields
    }

    static let invalid = RPCError.invalidArgument(field: "cursor", "is not a cursor WatchChanges returned")

    subscript(source: ChangeFeedSource) -> String {
        get { feeds[source.rawValue] }
        set { feeds[source.rawValue] = newValue }
    }

    var token: String { PageToken.encode(list: Self.list, feeds) }
}
