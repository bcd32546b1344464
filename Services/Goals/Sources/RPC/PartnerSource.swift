internal import Foundation
internal import HabitFlowSocialProtos
internal import HabitFlowRPC
internal import HabitFlowCrypto

/// A partnership as social answers it (or as its events tell it).
struct PartnershipInfo: Sendable, Hashable {
    var id: UUID
    var userID: UUID
    var partnerID: UUID
    var startedAt: Date?
}

/// The social service as goals uses it: who the user's partner is now, asked when a goal is shared (DESIGN.md section
/// 3a, "Partners"). Social's own errors (UNAVAILABLE while it is down, ...) reach the caller as they are: a goal is
/// never shared on a guess.
struct PartnerSource: Sendable {
    let client: Habitflow_Social_V1_SocialInternal.Client

    /// The user's partnership now; `nil` when they have no partner.
    func partnership(of userID: UUID, options: CallOptions) async throws -> PartnershipInfo? {
        let response = try await client.getPartnership(
            .with { $0.userID = userID.lowercasedString }, options: options)
        guard response.found, let id = UUID(canonical: response.partnershipID),
            let partnerID = UUID(canonical: response.partnerUserID), partnerID != userID
        else { return nil }
        return PartnershipInfo(
            id: id, userID: userID, partnerID: partnerID,
            startedAt: response.hasStartTime ? response.startTime.date : nil)
    }
}
