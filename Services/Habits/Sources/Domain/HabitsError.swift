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
    /// A unit hold (``HabitsStore/setUnitHolds(user:holder:habitIDs:unit:)``) names a habit whose unit (`nil`: none)
    /// is not the one the holder wants.
    case unitMismatch(habitID: UUID, unit: String?, wanted: String)
    /// A unit change of a habit whose unit a holder (a quantity goal) relies on.
    case habitUnitInUse(UUID)
    /// The account was deleted (UserDeleted or PurgeUser): nothing of it is re-created.
    case accountDeleted(UUID)
}
