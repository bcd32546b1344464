public import Foundation

/// What the sharing settings refuse, kept apart from ``SocialError`` so the two areas of the service evolve without
/// touching each other's files. The RPC layer words each case once (`SharingError+RPC.swift`).
public enum SharingError: Error, Hashable {
    /// Not one of the caller's live categories in habits (another user's, unknown, or deleted meanwhile).
    case categoryNotFound(UUID)
}
