internal import Foundation
internal import HabitFlowLocking

/// `ListChanges` reads shared by the watchers of one user: a user's devices usually sit at the same cursor, and a
/// notice wakes all of them at once, so the first read is made for all (single flight) instead of one per watcher.
///
/// A watcher joins only a read that started after it took its notice (`notBefore`): such a read began after the
/// commit the notice announced, so it sees it. An older read in flight may predate that commit; the watcher then
/// makes its own, which later watchers may join.
final class SharedReads: Sendable {
    struct Key: Hashable, Sendable {
        var userID: UUID
        var source: ChangeFeedSource
        var cursor: String
    }

    private struct Flight {
        var id: UInt64
        var started: ContinuousClock.Instant
        var task: Task<ChangeFeed.Page, any Error>
    }

    private let flights = Locked<(next: UInt64, byKey: [Key: Flight])>((0, [:]))

    func page(
        _ key: Key, notBefore: ContinuousClock.Instant, read: @escaping @Sendable () async throws -> ChangeFeed.Page
    ) async throws -> ChangeFeed.Page {
        let task = flights.withLock { flights in
            if let flight = flights.byKey[key], flight.started >= notBefore { return flight.task }
            flights.next += 1
            let id = flights.next
            // Unstructured: a watcher that goes away (its client left) must not cancel the read the others wait for.
            let task = Task {
                defer { self.land(key, id: id) }
                return try await read()
            }
            flights.byKey[key] = Flight(id: id, started: .now, task: task)
            return task
        }
        return try await task.value
    }

    private func land(_ key: Key, id: UInt64) {
        flights.withLock { flights in
            if flights.byKey[key]?.id == id { flights.byKey[key] = nil }
        }
    }
}
