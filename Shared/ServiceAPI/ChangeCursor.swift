public import Foundation
internal import HabitFlowCrypto

/// The kinds of resource a service's change feed (`ListChanges`) pages through; their order breaks ties between rows
/// one write stamped with the same change-sequence value. `start` (0) sorts before every kind.
public protocol ChangeKind: RawRepresentable<Int>, Comparable, Hashable, Sendable {
    static var start: Self { get }
}

extension ChangeKind {
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A position in a user's change feed: after the row of `kind` and `id` stamped with `sequence`. One write can stamp
/// several rows with one sequence value (a category deleted with its habits), so the kind and id break ties.
public struct ChangeCursor<Kind: ChangeKind>: Sendable, Hashable, Comparable {
    /// The row's change-sequence value: 0 (the beginning) or more, as Postgres sequences count.
    public var sequence: Int64
    public var kind: Kind
    public var id: UUID

    /// Before everything: a full sync.
    public static var beginning: Self { Self(sequence: 0, kind: .start, id: UUID.min) }

    public init(sequence: Int64, kind: Kind, id: UUID) {
        self.sequence = sequence
        self.kind = kind
        self.id = id
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.sequence, lhs.kind.rawValue, lhs.id.lowercasedString) < (rhs.sequence, rhs.kind.rawValue, rhs.id.lowercasedString)
    }

    /// The `(change_seq, id)` bound after which a table of `kind` continues: the same sequence value continues
    /// within the cursor's own kind, and entirely in later kinds.
    public func bound(for kind: Kind) -> (sequence: Int64, id: UUID) {
        if kind == self.kind { return (sequence, id) }
        return kind > self.kind ? (sequence - 1, UUID.max) : (sequence, UUID.max)
    }

    /// The cursor as the feed's `next_cursor`.
    public var token: String {
        PageToken.encode(list: "changes", [String(sequence), String(kind.rawValue), id.lowercasedString])
    }
}

extension RequestValidator {
    /// A `ListChanges` cursor: the beginning when empty, otherwise a `next_cursor` the feed returned.
    ///
    /// A token's checksum is no signature: anyone can wrap any fields in one, so every field is checked as if typed
    /// by hand: a negative sequence, which no feed returns, would make ``ChangeCursor/bound(for:)`` overflow.
    public mutating func changeCursor<Kind: ChangeKind>(_ token: String, field: String = "cursor") -> ChangeCursor<Kind> {
        guard let fields = pageToken(token, list: "changes", fieldCount: 3, field: field) else { return .beginning }
        guard let sequence = Int64(fields[0]), sequence >= 0, let kindValue = Int(fields[1]),
            let kind = Kind(rawValue: kindValue), let id = UUID(canonical: fields[2])
        else {
            reject(field, "is not a cursor ListChanges returned")
            return .beginning
        }
        return ChangeCursor(sequence: sequence, kind: kind, id: id)
    }
}
