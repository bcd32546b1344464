internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import SwiftProtobuf

/// Partnerships: one row per side with the partnership's id on both, one current partner per user (a unique index).
/// Starting and ending one publishes `PartnershipStarted`/`PartnershipEnded` (aggregate "partnership") through the
/// outbox in the same transaction, so goals never misses one.
extension SocialStore {
    /// The user's current partnership, from their side.
    func currentPartnership(_ db: some PostgresQueryable, of userID: UUID) async throws -> PartnershipRecord? {
        try await db.queryRow(
            "SELECT * FROM partner_details WHERE user_id = \(userID) AND ended_at IS NULL"
        ).map(PartnershipRecord.init(row:))
    }

    /// SendPartnerRequest: asks a friend to be partners; when the friend asked the caller already, they become
    /// partners at once and that request, accepted, is returned.
    func sendPartnerRequest(from userID: UUID, to friendID: UUID, requestID: UUID?, now: Date) async throws
        -> RequestRecord
    {
        // Checked first so that naming a stranger neither creates a user nor tells more than NOT_FOUND.
        guard try await isFriend(pool, userID, friendID) else { throw SocialError.notAFriend(friendID) }
        return try await write(users: userID, friendID, now: now) { transaction, userSequence, friendSequence in
            guard try await isFriend(transaction, userID, friendID) else { throw SocialError.notAFriend(friendID) }
            try await checkNoPartner(transaction, userID, friendID)
            if let theirs = try await pendingRequest(transaction, kind: .partner, from: friendID, to: userID) {
                try await startPartnership(
                    transaction, accepter: userID, sender: friendID, request: theirs.id,
                    accepterSequence: userSequence, senderSequence: friendSequence, now: now)
                try await settle(
                    transaction, theirs.id, .accepted, senderSequence: friendSequence,
                    recipientSequence: userSequence, now: now)
                return try required(try await request(transaction, id: theirs.id))
            }
            if try await transaction.queryRow(
                "SELECT 1 FROM requests WHERE sender_id = \(userID) AND kind = 'partner' AND state = 'pending'") != nil
            {
                throw SocialError.partnerRequestPending
            }
            let id = requestID ?? UUID()
            try await insertRequest(
                transaction, id: id, kind: .partner, from: userID, to: friendID, address: "", hidden: false,
                senderSequence: userSequence, recipientSequence: friendSequence, now: now)
            return try required(try await request(transaction, id: id))
        }
    }

    /// Refuses a partnership when either has a partner already.
    private func checkNoPartner(_ transaction: PostgresTransaction, _ userID: UUID, _ otherID: UUID) async throws {
        if try await currentPartnership(transaction, of: userID) != nil { throw SocialError.hasPartner(caller: true) }
        if try await currentPartnership(transaction, of: otherID) != nil { throw SocialError.hasPartner(caller: false) }
    }

    /// Makes the accepter and the sender of partner request `requestID` partners (both still friends, neither with
    /// a partner), cancels their other pending partner requests, and publishes `PartnershipStarted`.
    func startPartnership(
        _ transaction: PostgresTransaction, accepter userID: UUID, sender senderID: UUID, request requestID: UUID,
        accepterSequence: Int64, senderSequence: Int64, now: Date
    ) async throws {
        guard try await isFriend(transaction, userID, senderID) else { throw SocialError.notFriends(senderID) }
        try await checkNoPartner(transaction, userID, senderID)
        let partnershipID = UUID()
        try await transaction.execute(
            """
            INSERT INTO partners (user_id, partnership_id, partner_id, started_at, change_seq) \
            VALUES (\(userID), \(partnershipID), \(senderID), \(now), \(accepterSequence)), \
            (\(senderID), \(partnershipID), \(userID), \(now), \(senderSequence))
            """)
        try await cancelOtherPartnerRequests(
            transaction, of: [userID: accepterSequence, senderID: senderSequence], except: requestID, now: now)
        var event = Habitflow_Events_V1_PartnershipStarted()
        event.partnershipID = partnershipID.lowercasedString
        event.userID = userID.lowercasedString
        event.partnerUserID = senderID.lowercasedString
        event.startedAt = .init(date: now)
        try await transaction.appendToOutbox(
            try OutboxEvent(aggregateType: "partnership", aggregateID: event.partnershipID, message: event))
    }

    /// Cancels the pending partner requests of the users in `sequences` but `requestID` (one partner at a time: they
    /// can no longer be accepted). The third users they name take their own sequence values, in id order.
    private func cancelOtherPartnerRequests(
        _ transaction: PostgresTransaction, of sequences: [UUID: Int64], except requestID: UUID, now: Date
    ) async throws {
        let userIDs = Array(sequences.keys)
        let others = try await transaction.query(
            """
            SELECT id, sender_id, recipient_id FROM requests WHERE kind = 'partner' AND state = 'pending' \
            AND id <> \(requestID) AND (sender_id = ANY(\(userIDs)::uuid[]) OR recipient_id = ANY(\(userIDs)::uuid[]))
            """
        ).map { (id: try $0.decode(0, as: UUID.self), sender: try $0.decode(1, as: UUID.self),
                 recipient: try $0.decode(2, as: UUID.self)) }
        var stamps = sequences
        let thirdUsers = Set(others.flatMap { [$0.sender, $0.recipient] }).subtracting(userIDs)
        for id in thirdUsers.sorted(by: { $0.uuidString < $1.uuidString }) {
            stamps[id] = try await users.nextChangeSequence(transaction, user: id)
        }
        for other in others {
            try await settle(
                transaction, other.id, .canceled, senderSequence: stamps[other.sender],
                recipientSequence: stamps[other.recipient], now: now)
        }
    }

    /// Ends `partnership` (seen from its user's side): both rows get `ended_at`, and `PartnershipEnded` is published.
    func endPartnership(
        _ transaction: PostgresTransaction, _ partnership: PartnershipRecord, userSequence: Int64,
        partnerSequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE partners SET ended_at = \(now), \
            change_seq = CASE WHEN user_id = \(partnership.userID) THEN \(userSequence) ELSE \(partnerSequence) END \
            WHERE partnership_id = \(partnership.id) AND ended_at IS NULL
            """)
        var event = Habitflow_Events_V1_PartnershipEnded()
        event.partnershipID = partnership.id.lowercasedString
        event.userID = partnership.userID.lowercasedString
        event.partnerUserID = partnership.partner.id.lowercasedString
        event.endedAt = .init(date: now)
        try await transaction.appendToOutbox(
            try OutboxEvent(aggregateType: "partnership", aggregateID: event.partnershipID, message: event))
    }

    /// EndPartnership: ends the user's partnership; nothing to do when they have none.
    func endPartnership(of userID: UUID, now: Date) async throws {
        guard let found = try await currentPartnership(pool, of: userID) else { return }
        try await write(users: userID, found.partner.id, now: now) { transaction, userSequence, partnerSequence in
            guard let current = try await currentPartnership(transaction, of: userID) else { return }
            guard current.partner.id == found.partner.id else {
                // A new partnership began in between; the caller ended the one they saw.
                return
            }
            try await endPartnership(
                transaction, current, userSequence: userSequence, partnerSequence: partnerSequence, now: now)
        }
    }
}
