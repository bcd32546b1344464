internal import HabitFlowCrypto
public import HabitFlowRPC

/// The statuses the habits service answers with, worded once.
extension HabitsError: RPCErrorConvertible {
    public var rpcError: RPCError {
        switch self {
        case .habitNotFound(let habitID):
            .notFound(resourceType: "habit", name: habitID.lowercasedString)
        case .categoryNotFound(let categoryID):
            .notFound(resourceType: "category", name: categoryID.lowercasedString)
        case .habitDeleted(let habitID):
            .failedPrecondition(
                type: "HABIT_DELETED", subject: "habits/\(habitID.lowercasedString)", "the habit was deleted")
        case .habitLimit:
            .failedPrecondition(
                type: "HABIT_LIMIT", subject: "habits",
                "at most \(HabitRules.maximumLiveHabits) habits; delete one to add another")
        case .categoryLimit:
            .failedPrecondition(
                type: "CATEGORY_LIMIT", subject: "categories",
                "at most \(HabitRules.maximumCategories) categories; delete one to add another")
        case .habitNameTaken(let name):
            .alreadyExists(resourceType: "habit", name: name, "a habit named \"\(name)\" already exists")
        case .categoryNameTaken(let name):
            .alreadyExists(resourceType: "category", name: name, "a category named \"\(name)\" already exists")
        case .unitMismatch(let habitID, let unit, let wanted):
            .failedPrecondition(
                reason: "UNIT_MISMATCH", subject: "habits/\(habitID.lowercasedString)",
                "habit \(habitID.lowercasedString) has \(unit.map { "the unit \"\($0)\"" } ?? "no unit"), not \"\(wanted)\"")
        case .habitUnitInUse(let habitID):
            .failedPrecondition(
                reason: "HABIT_UNIT_IN_USE", subject: "habits/\(habitID.lowercasedString)",
                "a quantity goal relies on this habit's unit; unlink the habit from that goal first to change its unit")
        case .accountDeleted(let userID):
            .failedPrecondition(
                type: "ACCOUNT_DELETED", subject: "users/\(userID.lowercasedString)", "the account was deleted")
        }
    }
}
