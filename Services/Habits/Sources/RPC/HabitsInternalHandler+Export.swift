internal import Foundation
internal import HabitFlowHabitsProtos
internal import HabitFlowRPC
internal import HabitFlowServiceAPI

/// `HabitsInternal/ExportUser`: everything the service holds of a user, streamed so that years of entries are
/// never held in memory (a page of entries at a time, here and at the caller).
extension HabitsInternalHandler {
    /// Entries per message of the export, and per statement reading them.
    static let exportedEntriesPerMessage = 1_000

    func exportUser(
        request: Habitflow_Habits_V1_ExportUserRequest,
        responses: ResponseWriter<Habitflow_Habits_V1_ExportUserResponse>, context: ServerContext
    ) async throws {
        try requireServiceCaller()
        var validator = RequestValidator()
        let userID = validator.id(request.userID, field: "user_id")
        try validator.check()
        // An export creates nobody: a user the service has never seen has one empty message (a deleted account is
        // refused, as every internal call refuses it).
        guard try await store.knowsUser(userID) else {
            try await responses.write(.init())
            return
        }
        let categories = try await store.allCategories(of: userID)
        let habits = try await store.habits(user: userID, includeDeleted: true, createdAfter: .min, limit: .max)
        try await responses.write(
            .with {
                $0.categories = categories.map(\.proto)
                $0.habits = habits.map(\.proto)
            })
        let exported = Set(habits.map(\.id))
        guard !exported.isEmpty else { return }  // entries belong to habits
        var after: UUID?
        while true {
            let page = try await store.exportEntries(user: userID, after: after, limit: Self.exportedEntriesPerMessage)
            // Entries of the habits just sent only: one of a habit created since would name a habit the export lacks.
            let entries = page.filter { exported.contains($0.habitID) }
            if !entries.isEmpty { try await responses.write(.with { $0.entries = entries.map(\.proto) }) }
            guard page.count == Self.exportedEntriesPerMessage, let last = page.last else { return }
            after = last.id
        }
    }
}
