public import Foundation

// What the service keeps, as plain values: no database or RPC types (the store decodes rows into them, the RPC layer
// maps them to protos for the caller who sees them).

/// Another user as friends see them: never an email.
public struct PersonRecord: Sendable, Hashable {
    public var id: UUID
    public var username: String
    public var displayName: String

    public init(id: UUID, username: String, displayName: String) {
        self.id = id
        self.username = username
        self.displayName = displayName
    }
}

public enum RequestKind: String, Sendable, Hashable {
    case friend, partner
}

public enum RequestState: String, Sendable, Hashable {
    case pending, accepted, declined, canceled

    /// What the sender sees: a decline is silent, so a declined request looks pending to them.
    var seenBySender: RequestState { self == .declined ? .pending : self }
}

/// A friend or partner request, with both people as the service knows them.
public struct RequestRecord: Sendable, Hashable {
    public var id: UUID
    public var kind: RequestKind
    public var state: RequestState
    public var sender: PersonRecord
    /// `nil` for a friend request to an address no account has (or had when it was sent).
    public var recipient: PersonRecord?
    /// Friend requests: the address as the sender typed it.
    public var addressedTo: String
    /// Sent by someone the recipient had blocked: never shown to the recipient.
    public var hidden: Bool
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: UUID, kind: RequestKind, state: RequestState, sender: PersonRecord, recipient: PersonRecord?,
        addressedTo: String, hidden: Bool, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.kind = kind
        self.state = state
        self.sender = sender
        self.recipient = recipient
        self.addressedTo = addressedTo
        self.hidden = hidden
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Whether `userID` may see the request at all: its sender, or its recipient unless it is hidden from them.
    public func isVisible(to userID: UUID) -> Bool {
        sender.id == userID || (recipient?.id == userID && !hidden)
    }
}

/// One side of a friendship: `person` is the friend.
public struct FriendRecord: Sendable, Hashable {
    public var person: PersonRecord
    public var since: Date
    public var deletedAt: Date?
    /// The friend is the user's current partner.
    public var partner: Bool
    public var changeSequence: Int64

    public init(person: PersonRecord, since: Date, deletedAt: Date?, partner: Bool, changeSequence: Int64) {
        self.person = person
        self.since = since
        self.deletedAt = deletedAt
        self.partner = partner
        self.changeSequence = changeSequence
    }
}

/// A user the user blocked, with their names as they were when blocked.
public struct BlockRecord: Sendable, Hashable {
    public var person: PersonRecord
    public var createdAt: Date
    public var deletedAt: Date?
    public var changeSequence: Int64

    public init(person: PersonRecord, createdAt: Date, deletedAt: Date?, changeSequence: Int64) {
        self.person = person
        self.createdAt = createdAt
        self.deletedAt = deletedAt
        self.changeSequence = changeSequence
    }
}

/// One side of a partnership: `partner` is the other user.
public struct PartnershipRecord: Sendable, Hashable {
    public var id: UUID
    public var userID: UUID
    public var partner: PersonRecord
    public var startedAt: Date
    public var endedAt: Date?
    public var changeSequence: Int64

    public init(
        id: UUID, userID: UUID, partner: PersonRecord, startedAt: Date, endedAt: Date?, changeSequence: Int64
    ) {
        self.id = id
        self.userID = userID
        self.partner = partner
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.changeSequence = changeSequence
    }
}
