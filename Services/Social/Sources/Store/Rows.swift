internal import Foundation
internal import HabitFlowPostgres

// Decoding the rows of `SELECT *` from request_details, friend_details, blocks and partner_details, by column name.

extension RequestRecord {
    /// A row of the `request_details` view.
    init(row: PostgresRow) throws {
        guard let kind = RequestKind(rawValue: try row.decode("kind")),
            let state = RequestState(rawValue: try row.decode("state"))
        else { throw PostgresError(kind: .decodingFailed, message: "a request row with an unknown kind or state") }
        let recipientID = try row.decode("recipient_id", as: UUID?.self)
        self.init(
            id: try row.decode("id"), kind: kind, state: state,
            sender: PersonRecord(
                id: try row.decode("sender_id"), username: try row.decode("sender_username"),
                displayName: try row.decode("sender_display_name")),
            recipient: try recipientID.map {
                PersonRecord(
                    id: $0, username: try row.decode("recipient_username", as: String?.self) ?? "",
                    displayName: try row.decode("recipient_display_name", as: String?.self) ?? "")
            },
            addressedTo: try row.decode("addressed_to"), hidden: try row.decode("hidden"),
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"))
    }
}

extension FriendRecord {
    /// A row of the `friend_details` view.
    init(row: PostgresRow) throws {
        self.init(
            person: PersonRecord(
                id: try row.decode("friend_id"), username: try row.decode("username"),
                displayName: try row.decode("display_name")),
            since: try row.decode("since"), deletedAt: try row.decode("deleted_at"), partner: try row.decode("partner"),
            changeSequence: try row.decode("change_seq"))
    }
}

extension BlockRecord {
    /// A row of `blocks`.
    init(row: PostgresRow) throws {
        self.init(
            person: PersonRecord(
                id: try row.decode("blocked_id"), username: try row.decode("username"),
                displayName: try row.decode("display_name")),
            createdAt: try row.decode("created_at"), deletedAt: try row.decode("deleted_at"),
            changeSequence: try row.decode("change_seq"))
    }
}

extension PartnershipRecord {
    /// A row of the `partner_details` view.
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("partnership_id"), userID: try row.decode("user_id"),
            partner: PersonRecord(
                id: try row.decode("partner_id"), username: try row.decode("username"),
                displayName: try row.decode("display_name")),
            startedAt: try row.decode("started_at"), endedAt: try row.decode("ended_at"),
            changeSequence: try row.decode("change_seq"))
    }
}

/// What a statement must have returned (a row the transaction just wrote, read back).
func required<Value>(_ value: Value?) throws -> Value {
    guard let value else {
        throw PostgresError(kind: .other, message: "a statement returned no row where one was expected")
    }
    return value
}
