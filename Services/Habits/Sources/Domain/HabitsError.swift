public import Foundation

/// What the habits rules refuse. The RPC layer turns each case into its gRPC status (`HabitsError+RPC.swift`).
public enum HabitsError: Error, Hashable {
    /// Also the answer for another user's habit: ids leak nothing.
    case habitNotFound(UUID)
    case categoryNotFound(UUID)
    case habitDeleted(UUID)
    case habitLimit
    case categoryLimit
    case habitNameTaken(String)
    case categoryNameTaken(String)
    /// The account was deleted (UserDeleted or PurgeUser): nothing of it is re-created.
    case accountDeleted(UUID)
}
