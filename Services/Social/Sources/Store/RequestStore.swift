internal import Foundation
internal import HabitFlowPostgres

/// Friend and partner requests: one row each, indexed by sender and recipient, each side stamped with its own change
/// sequence (`sender_seq`, `recipient_seq`). A decline stamps only the recipient's side: the sender is not told.
extension SocialStore {
    /// A request by id, as stored.
    func request(_ db: some PostgresQueryable, id: UUID) async throws -> RequestRecord? {
        try await db.queryRow("SELECT * FROM request_details WHERE id = \(id)").map(RequestRecord.init(row:))
    }

    /// The sender's request to `address` (ignoring case) that still looks pending to them (a declined one does).
    func pendingFriendRequest(_ db: some PostgresQueryable, from senderID: UUID, address: String) async throws
        -> RequestRecord?
    {
        try await db.queryRow(
            """
            SELECT * FROM request_details WHERE sender_id = \(senderID) AND kind = 'friend' \
            AND state IN ('pending', 'declined') AND lower(addressed_to) = lower(\(address)) \
            ORDER BY created_at LIMIT 1
            """
        ).map(RequestRecord.init(row:))
    }

    /// The pending request of `kind` from `senderID` to `recipientID`, if any.
    func pendingRequest(_ db: some PostgresQueryable, kind: RequestKind, from senderID: UUID, to recipientID: UUID)
        async throws -> RequestRecord?
    {
        try await db.queryRow(
            """
            SELECT * FROM request_details WHERE sender_id = \(senderID) AND recipient_id = \(recipientID) \
            AND kind = \(kind.rawValue) AND state = 'pending' AND NOT hidden ORDER BY created_at LIMIT 1
            """
        ).map(RequestRecord.init(row:))
    }

    /// Sends a friend request to `address` (as typed, trimmed), which auth resolved to `recipient` (`nil`: no
    /// account has it). The same answer shape either way; a pending request to the same address is returned as it
    /// is; when the recipient asked the sender already, both become friends and that request, accepted, is returned.
    func sendFriendRequest(
        from senderID: UUID, address: String, recipient: PersonRecord?, requestID: UUID?, now: Date
    ) async throws -> RequestRecord {
        let id = requestID ?? UUID()
        guard let recipient, try await !isDeleted(recipient.id) else {
            return try await write(user: senderID) { transaction, sequence in
                if let existing = try await pendingFriendRequest(transaction, from: senderID, address: address) {
                    return existing
                }
                try await checkSendLimits(transaction, senderID)
                try await insertRequest(
                    transaction, id: id, kind: .friend, from: senderID, to: nil, address: address, hidden: false,
                    senderSequence: sequence, recipientSequence: nil, now: now)
                return try required(try await request(transaction, id: id))
            }
        }
        return try await write(users: senderID, recipient.id, now: now) { transaction, senderSequence, otherSequence in
            try await rememberNames(transaction, recipient)
            if let existing = try await pendingFriendRequest(transaction, from: senderID, address: address) {
                return existing
            }
            if try await isFriend(transaction, senderID, recipient.id) {
                throw SocialError.alreadyFriends(recipient.id)
            }
            if try await hasBlocked(transaction, senderID, recipient.id) { throw SocialError.blocked(recipient.id) }
            let hidden = try await hasBlocked(transaction, recipient.id, senderID)
            if !hidden,
                let theirs = try await pendingRequest(transaction, kind: .friend, from: recipient.id, to: senderID)
            {
                try await checkRoomForFriend(transaction, senderID, recipient.id)
                try await befriend(
                    transaction, senderID, recipient.id, userSequence: senderSequence, otherSequence: otherSequence,
                    now: now)
                try await settle(
                    transaction, theirs.id, .accepted, senderSequence: otherSequence, recipientSequence: senderSequence,
                    now: now)
                return try required(try await request(transaction, id: theirs.id))
            }
            try await checkSendLimits(transaction, senderID)
            try await insertRequest(
                transaction, id: id, kind: .friend, from: senderID, to: recipient.id, address: address, hidden: hidden,
                senderSequence: senderSequence, recipientSequence: hidden ? nil : otherSequence, now: now)
            return try required(try await request(transaction, id: id))
        }
    }

    /// A new friend request needs room: fewer than 100 friends and 100 pending outgoing friend requests.
    private func checkSendLimits(_ transaction: PostgresTransaction, _ senderID: UUID) async throws {
        if try await friendCount(transaction, senderID) >= SocialRules.maximumFriends {
            throw SocialError.friendLimit(caller: true)
        }
        let pending = try await transaction.queryRow(
            """
            SELECT count(*) FROM requests WHERE sender_id = \(senderID) AND kind = 'friend' \
            AND state IN ('pending', 'declined')
            """
        )?.decode(0, as: Int64.self) ?? 0
        if pending >= SocialRules.maximumPendingRequests { throw SocialError.pendingRequestLimit }
    }

    func insertRequest(
        _ transaction: PostgresTransaction, id: UUID, kind: RequestKind, from senderID: UUID, to recipientID: UUID?,
        address: String, hidden: Bool, senderSequence: Int64, recipientSequence: Int64?, now: Date
    ) async throws {
        do {
            try await transaction.execute(
                """
                INSERT INTO requests (id, kind, sender_id, recipient_id, addressed_to, state, hidden, created_at, \
                updated_at, sender_seq, recipient_seq) \
                VALUES (\(id), \(kind.rawValue), \(senderID), \(recipientID as UUID?), \(address), 'pending', \
                \(hidden), \
                \(now), \(now), \(senderSequence), \(recipientSequence as Int64?))
                """)
        } catch let error as PostgresError where error.violates("requests_pending_partner") {
            throw SocialError.partnerRequestPending
        } catch let error as PostgresError where error.violates("requests_pkey") {
            throw SocialError.requestIDTaken(id)
        }
    }

    /// Moves a request to `state`, stamping each side with its sequence value (`nil` leaves that side as it was).
    func settle(
        _ transaction: PostgresTransaction, _ id: UUID, _ state: RequestState, senderSequence: Int64?,
        recipientSequence: Int64?, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE requests SET state = \(state.rawValue), updated_at = \(now), \
            sender_seq = coalesce(\(senderSequence as Int64?), sender_seq), \
            recipient_seq = coalesce(\(recipientSequence as Int64?), recipient_seq) WHERE id = \(id)
            """)
    }

    /// The request the caller may act on: visible to them, and theirs to act on (as its recipient or sender).
    private func actionable(_ requestID: UUID, by userID: UUID, asRecipient: Bool, action: String) async throws
        -> RequestRecord
    {
        guard let found = try await request(pool, id: requestID), found.isVisible(to: userID) else {
            throw SocialError.requestNotFound(requestID)
        }
        guard (asRecipient ? found.recipient?.id : found.sender.id) == userID else {
            throw SocialError.notYourRequest(requestID, action: action)
        }
        return found
    }

    /// The request re-read under the users' locks: it may have changed (or gone with a deleted account) meanwhile.
    /// `done` when it is in `target` already (as the caller sees it); refused when it left pending otherwise.
    private func recheck(_ transaction: PostgresTransaction, _ requestID: UUID, target: RequestState, by userID: UUID)
        async throws -> (RequestRecord, done: Bool)
    {
        guard let current = try await request(transaction, id: requestID), current.isVisible(to: userID) else {
            throw SocialError.requestNotFound(requestID)
        }
        let state = current.sender.id == userID ? current.state.seenBySender : current.state
        if state == target { return (current, true) }
        guard state == .pending else { throw SocialError.requestNotPending(requestID, state: state) }
        return (current, false)
    }

    /// The recipient accepts: friends, or partners. Accepting again returns the request unchanged.
    func acceptRequest(_ requestID: UUID, by userID: UUID, now: Date) async throws -> RequestRecord {
        let found = try await actionable(requestID, by: userID, asRecipient: true, action: "accept")
        return try await write(users: userID, found.sender.id, now: now) { transaction, userSequence, senderSequence in
            let (current, done) = try await recheck(transaction, requestID, target: .accepted, by: userID)
            if done { return current }
            switch current.kind {
            case .friend:
                if try await !isFriend(transaction, userID, current.sender.id) {
                    try await checkRoomForFriend(transaction, userID, current.sender.id)
                    try await befriend(
                        transaction, userID, current.sender.id, userSequence: userSequence,
                        otherSequence: senderSequence, now: now)
                }
            case .partner:
                try await startPartnership(
                    transaction, accepter: userID, sender: current.sender.id, request: requestID,
                    accepterSequence: userSequence, senderSequence: senderSequence, now: now)
            }
            try await settle(
                transaction, requestID, .accepted, senderSequence: senderSequence, recipientSequence: userSequence,
                now: now)
            return try required(try await request(transaction, id: requestID))
        }
    }

    /// The recipient declines, silently: only their side changes.
    func declineRequest(_ requestID: UUID, by userID: UUID, now: Date) async throws -> RequestRecord {
        _ = try await actionable(requestID, by: userID, asRecipient: true, action: "decline")
        return try await write(user: userID) { transaction, sequence in
            let (current, done) = try await recheck(transaction, requestID, target: .declined, by: userID)
            if done { return current }
            try await settle(
                transaction, requestID, .declined, senderSequence: nil, recipientSequence: sequence, now: now)
            return try required(try await request(transaction, id: requestID))
        }
    }

    /// The sender withdraws the request (also one the recipient declined, which still looks pending to them). A
    /// recipient who declined keeps seeing it declined: their side is not stamped.
    func cancelRequest(_ requestID: UUID, by userID: UUID, now: Date) async throws -> RequestRecord {
        let found = try await actionable(requestID, by: userID, asRecipient: false, action: "cancel")
        let cancel: (PostgresTransaction, Int64, Int64?) async throws -> RequestRecord = {
            transaction, sequence, recipientSequence in
            let (current, done) = try await recheck(transaction, requestID, target: .canceled, by: userID)
            if done { return current }
            let stampRecipient = current.state == .pending && !current.hidden
            try await settle(
                transaction, requestID, .canceled, senderSequence: sequence,
                recipientSequence: stampRecipient ? recipientSequence : nil, now: now)
            return try required(try await request(transaction, id: requestID))
        }
        guard let recipientID = found.recipient?.id, try await !isDeleted(recipientID) else {
            return try await write(user: userID) { try await cancel($0, $1, nil) }
        }
        return try await write(users: userID, recipientID, now: now) { try await cancel($0, $1, $2) }
    }

    /// Pending requests to or from the user (as they see them: a declined one of theirs looks pending; one hidden by
    /// a block never shows), newest first.
    func pendingRequests(
        of userID: UUID, incoming: Bool, outgoing: Bool, kind: RequestKind?, offset: Int, limit: Int
    ) async throws -> [RequestRecord] {
        try await pool.query(
            """
            SELECT * FROM request_details \
            WHERE (\(kind?.rawValue as String?)::text IS NULL OR kind = \(kind?.rawValue as String?)) AND \
            ((\(outgoing) AND sender_id = \(userID) AND state IN ('pending', 'declined')) \
            OR (\(incoming) AND recipient_id = \(userID) AND state = 'pending' AND NOT hidden)) \
            ORDER BY created_at DESC, id DESC OFFSET \(offset) LIMIT \(limit)
            """
        ).map(RequestRecord.init(row:))
    }

    /// Cancels every pending request between the two, both ways (a block), stamping both sides.
    func cancelRequests(
        _ transaction: PostgresTransaction, between userID: UUID, _ otherID: UUID, userSequence: Int64,
        otherSequence: Int64, now: Date
    ) async throws {
        try await transaction.execute(
            """
            UPDATE requests SET state = 'canceled', updated_at = \(now), \
            sender_seq = CASE WHEN sender_id = \(userID) THEN \(userSequence) ELSE \(otherSequence) END, \
            recipient_seq = CASE WHEN hidden THEN recipient_seq \
            WHEN recipient_id = \(userID) THEN \(userSequence) ELSE \(otherSequence) END \
            WHERE state IN ('pending', 'declined') AND ((sender_id = \(userID) AND recipient_id = \(otherID)) \
            OR (sender_id = \(otherID) AND recipient_id = \(userID)))
            """)
    }
}
