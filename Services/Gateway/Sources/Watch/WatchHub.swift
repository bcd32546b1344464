internal import Foundation
internal import HabitFlowLocking
internal import HabitFlowRPC

/// The open `WatchChanges` streams of this gateway, by user: where change notices are turned into work.
///
/// A notice marks the user's watchers dirty for its feed (a flag per feed, not a queue) and wakes them; each watcher
/// then reads the feed itself from its own cursor. So a watcher's memory does not grow with the write rate, and a
/// burst of writes costs one `ListChanges` per watcher, not one per write.
final class WatchHub: Sendable {
    struct Limits: Sendable, Hashable {
        /// Open watchers per user (devices and tabs); one more is `RESOURCE_EXHAUSTED`.
        var perUser: Int
        /// Open watchers on this gateway.
        var total: Int
    }

    private struct State {
        var watchers: [UUID: [ObjectIdentifier: Watcher]] = [:]
        var count = 0
        var draining = false
    }

    let limits: Limits
    private let state = Locked(State())

    init(limits: Limits) {
        self.limits = limits
    }

    var count: Int { state.withLock { $0.count } }

    /// The users with at least one open stream here.
    var watchedUsers: Set<UUID> { state.withLock { Set($0.watchers.keys) } }

    /// Adds a watcher, or refuses it: too many for the user or this gateway (`RESOURCE_EXHAUSTED`), or the gateway
    /// is shutting down (`UNAVAILABLE`).
    func register(_ watcher: Watcher) throws(RPCError) {
        let refusal = state.withLock { state -> RPCError? in
            if state.draining { return Self.shuttingDown }
            let mine = state.watchers[watcher.userID, default: [:]]
            if mine.count >= limits.perUser {
                return RPCError(
                    .resourceExhausted,
                    "too many open WatchChanges streams for this account (at most \(limits.perUser)); close one")
            }
            if state.count >= limits.total {
                return RPCError(.resourceExhausted, "this gateway has too many open WatchChanges streams; retry later")
            }
            state.watchers[watcher.userID, default: [:]][ObjectIdentifier(watcher)] = watcher
            state.count += 1
            return nil
        }
        if let refusal { throw refusal }
    }

    func unregister(_ watcher: Watcher) {
        state.withLock { state in
            let id = ObjectIdentifier(watcher)
            guard state.watchers[watcher.userID]?.removeValue(forKey: id) != nil else { return }
            if state.watchers[watcher.userID]?.isEmpty == true { state.watchers[watcher.userID] = nil }
            state.count -= 1
        }
    }

    /// `users` changed in `source`.
    func changed(_ users: some Sequence<UUID>, in source: ChangeFeedSource) {
        let watchers = state.withLock { state in users.flatMap { state.watchers[$0].map { Array($0.values) } ?? [] } }
        for watcher in watchers { watcher.markDirty(source) }
    }

    /// Anyone may have changed in `source` (a notice stream was (re)opened, so notices may have been lost).
    func changedAll(in source: ChangeFeedSource) {
        for watcher in state.withLock({ $0.watchers.values.flatMap(\.values) }) { watcher.markDirty(source) }
    }

    /// Ends every watcher with `UNAVAILABLE` (the client reconnects, to another gateway, with its last cursor) and
    /// refuses new ones: the gateway is shutting down.
    func drain() {
        let all = state.withLock { state in
            state.draining = true
            return state.watchers.values.flatMap(\.values)
        }
        for watcher in all { watcher.end(Self.shuttingDown) }
    }

    static let shuttingDown = RPCError(
        .unavailable, "the gateway is shutting down; call WatchChanges again with the last cursor")
}

/// One `WatchChanges` stream's mailbox: which feeds have news, and whether it must end.
final class Watcher: Sendable {
    let userID: UUID
    let wakeup = Wakeup()
    /// Bit `source.rawValue` set: the feed may have news. All set at first: the stream starts with a catch-up.
    private let state = Locked<(dirty: UInt8, end: RPCError?)>((0b111, nil))

    init(userID: UUID) {
        self.userID = userID
    }

    func markDirty(_ source: ChangeFeedSource) {
        state.withLock { $0.dirty |= 1 << source.rawValue }
        wakeup.signal()
    }

    func end(_ error: RPCError) {
        state.withLock { $0.end = error }
        wakeup.signal()
    }

    /// The feeds marked since the last call (clearing them), or the error to end with.
    func take() throws(RPCError) -> [ChangeFeedSource] {
        let (dirty, end) = state.withLock { state in
            defer { state.dirty = 0 }
            return state
        }
        if let end { throw end }
        return ChangeFeedSource.allCases.filter { dirty & (1 << $0.rawValue) != 0 }
    }
}
