public import Foundation

/// What the social rules refuse. The RPC layer turns each case into its gRPC status (`SocialError+RPC.swift`).
public enum SocialError: Error, Hashable {
    /// The account was deleted: its calls are refused and nothing of it is re-created.
    case accountDeleted(UUID)
}
