internal import Foundation
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import SwiftProtobuf
internal import HabitFlowCrypto

/// The `auth` schema: every statement the service runs, one `extension AuthStore` per entity file. Handlers validate
/// input and hash passwords; this turns it into SQL, and every write that takes several statements runs here in one
/// transaction.
struct AuthStore: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) {
        self.pool = pool
    }

    // MARK: - Events

    /// Publishes `message` about the account through the outbox, in `transaction`.
    func appendUserEvent(_ transaction: PostgresTransaction, _ message: some SwiftProtobuf.Message, userID: UUID)
        async throws
    {
        try await transaction.appendToOutbox(
            OutboxEvent(aggregateType: "user", aggregateID: userID.lowercasedString, message: message))
    }

    func userCreatedEvent(_ user: UserRecord) -> Habitflow_Events_V1_UserCreated {
        var event = Habitflow_Events_V1_UserCreated()
        event.userID = user.id.lowercasedString
        event.username = user.username
        event.displayName = user.displayName
        event.timeZone = user.timeZone
        event.createdAt = Google_Protobuf_Timestamp(date: user.createdAt)
        return event
    }
}

extension PostgresError {
    /// A unique violation of the named constraint or index.
    func violates(_ constraint: String) -> Bool {
        kind == .uniqueViolation && self.constraint == constraint
    }
}
