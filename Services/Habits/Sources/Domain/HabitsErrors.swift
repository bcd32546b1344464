public import Foundation
public import HabitFlowRPC
internal import HabitFlowCrypto

/// The statuses the habits service answers with, worded once.
public enum HabitsErrors {
    /// Also the answer for another user's habit: ids leak nothing.
    public static func habitNotFound(_ habitID: UUID) -> RPCError {
        .notFound(resourceType: "habit", name: habitID.lowercasedString)
    }

    public static func categoryNotFound(_ categoryID: UUID) -> RPCError {
        .notFound(resourceType: "category", name: categoryID.lowercasedString)
    }

    public static func habitDeleted(_ habitID: UUID) -> RPCError {
        .failedPrecondition(type: "HABIT_DELETED", subject: "habits/\(habitID.lowercasedString)", "the habit was deleted")
    }

    public static func habitLimit() -> RPCError {
        .failedPrecondition(
            type: "HABIT_LIMIT", subject: "habits",
            "at most \(HabitRules.maximumLiveHabits) habits; delete one to add another")
    }

    public static func categoryLimit() -> RPCError {
        .failedPrecondition(
            type: "CATEGORY_LIMIT", subject: "categories",
            "at most \(HabitRules.maximumCategories) categories; delete one to add another")
    }

    public static func habitNameTaken(_ name: String) -> RPCError {
        .alreadyExists(resourceType: "habit", name: name, "a habit named \"\(name)\" already exists")
    }

    public static func categoryNameTaken(_ name: String) -> RPCError {
        .alreadyExists(resourceType: "category", name: name, "a category named \"\(name)\" already exists")
    }

    /// The account was deleted (UserDeleted or PurgeUser): nothing of it is re-created.
    public static func accountDeleted(_ userID: UUID) -> RPCError {
        .failedPrecondition(type: "ACCOUNT_DELETED", subject: "users/\(userID.lowercasedString)", "the account was deleted")
    }
}
