public import Foundation
internal import HabitFlowEvents
internal import HabitFlowOutbox
internal import HabitFlowPostgres
internal import HabitFlowCrypto

extension HabitsStore {
    /// The user's live categories in display order.
    public func categories(of userID: UUID) async throws -> [CategoryRecord] {
        try await liveCategories(pool, of: [userID])[userID] ?? []
    }

    /// The user's live categories in display order, in one statement with the check that the service knows the user;
    /// `nil` when it does not (a new or a deleted account: ``prepareUser(_:now:)`` decides, then ``categories(of:)``).
    public func categoriesOfKnownUser(_ userID: UUID) async throws -> [CategoryRecord]? {
        try await knownUserRows(
            """
            SELECT c.* FROM users u LEFT JOIN categories c ON c.user_id = u.user_id AND c.deleted_at IS NULL \
            WHERE u.user_id = \(userID) ORDER BY c.position, c.created_at, c.id
            """, CategoryRecord.init(row:))
    }

    /// Every category of the user's, deleted ones included: live ones in display order, then deleted ones by
    /// deletion time (the export).
    public func allCategories(of userID: UUID) async throws -> [CategoryRecord] {
        try await pool.query(
            """
            SELECT * FROM categories WHERE user_id = \(userID) \
            ORDER BY deleted_at NULLS FIRST, position, created_at, id
            """
        ).map(CategoryRecord.init(row:))
    }

    private func liveCategories(_ transaction: PostgresTransaction, user userID: UUID) async throws -> [CategoryRecord] {
        try await liveCategories(transaction, of: [userID])[userID] ?? []
    }

    /// Adds a category at the end. With a client id that exists already, returns that category (a retry).
    public func createCategory(user userID: UUID, id: UUID?, name: String, now: Date) async throws -> CategoryRecord {
        try await write(user: userID) { transaction, sequence in
            if let id, let existing = try await transaction.queryRow(
                "SELECT * FROM categories WHERE user_id = \(userID) AND id = \(id)")
            {
                return try CategoryRecord(row: existing)
            }
            let live = try await liveCategories(transaction, user: userID)
            guard live.count < HabitRules.maximumCategories else { throw HabitsError.categoryLimit }
            let position = (live.map(\.position).max() ?? -1) + 1
            do {
                let row = try await transaction.queryRow(
                    """
                    INSERT INTO categories (user_id, id, name, position, created_at, updated_at, change_seq) \
                    VALUES (\(userID), \(id ?? UUID.random()), \(name), \(Int32(position)), \(now), \(now), \(sequence)) \
                    RETURNING *
                    """)
                return try CategoryRecord(row: try required(row))
            } catch let error as PostgresError where error.violates("categories_live_name") {
                throw HabitsError.categoryNameTaken(name)
            }
        }
    }

    public func renameCategory(user userID: UUID, id: UUID, name: String, now: Date) async throws -> CategoryRecord {
        try await write(user: userID) { transaction, sequence in
            do {
                guard
                    let row = try await transaction.queryRow(
                        """
                        UPDATE categories SET name = \(name), updated_at = \(now), change_seq = \(sequence) \
                        WHERE user_id = \(userID) AND id = \(id) AND deleted_at IS NULL RETURNING *
                        """)
                else { throw HabitsError.categoryNotFound(id) }
                return try CategoryRecord(row: row)
            } catch let error as PostgresError where error.violates("categories_live_name") {
                throw HabitsError.categoryNameTaken(name)
            }
        }
    }

    /// Puts `ids` first, in that order; the other live categories follow in their previous order. Only categories
    /// whose position changes are written (and show up in the change feed).
    public func reorderCategories(user userID: UUID, ids: [UUID], now: Date) async throws -> [CategoryRecord] {
        try await write(user: userID) { transaction, sequence in
            let live = try await liveCategories(transaction, user: userID)
            let liveIDs = Set(live.map(\.id))
            if let unknown = ids.first(where: { !liveIDs.contains($0) }) { throw HabitsError.categoryNotFound(unknown) }
            let listed = Set(ids)
            let order = ids + live.map(\.id).filter { !listed.contains($0) }
            try await transaction.execute(
                """
                UPDATE categories c SET position = (o.ordinal - 1)::integer, updated_at = \(now), change_seq = \(sequence) \
                FROM unnest(\(order)::uuid[]) WITH ORDINALITY AS o(id, ordinal) \
                WHERE c.user_id = \(userID) AND c.id = o.id AND c.position <> o.ordinal - 1
                """)
            return try await liveCategories(transaction, user: userID)
        }
    }

    /// Tombstones the category, moves its habits (deleted ones too) to Uncategorized and publishes CategoryDeleted.
    /// A category deleted before is returned as it is.
    public func deleteCategory(user userID: UUID, id: UUID, now: Date) async throws -> CategoryRecord {
        try await write(user: userID) { transaction, sequence in
            guard let current = try await transaction.queryRow(
                "SELECT * FROM categories WHERE user_id = \(userID) AND id = \(id)")
            else { throw HabitsError.categoryNotFound(id) }
            let category = try CategoryRecord(row: current)
            if category.deletedAt != nil { return category }
            let deleted = try await transaction.queryRow(
                """
                UPDATE categories SET deleted_at = \(now), updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND id = \(id) RETURNING *
                """)
            try await transaction.execute(
                """
                UPDATE habits SET category_id = NULL, updated_at = \(now), change_seq = \(sequence) \
                WHERE user_id = \(userID) AND category_id = \(id)
                """)
            var event = Habitflow_Events_V1_CategoryDeleted()
            event.userID = userID.lowercasedString
            event.categoryID = id.lowercasedString
            try await transaction.appendToOutbox(
                OutboxEvent(aggregateType: "category", aggregateID: event.categoryID, message: event))
            return try CategoryRecord(row: try required(deleted))
        }
    }
}

/// What a statement must have returned (a row the transaction just wrote, read back).
func required<Value>(_ value: Value?) throws -> Value {
    guard let value else { throw PostgresError(kind: .other, message: "a statement returned no row where one was expected") }
    return value
}
