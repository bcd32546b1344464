internal import Foundation
internal import HabitFlowCalendar
internal import HabitFlowCrypto
internal import HabitFlowInternalCredential
internal import HabitFlowRPC
internal import HabitFlowServiceAPI
internal import HabitFlowSocialProtos
internal import SwiftProtobuf

/// Sharing settings: what the caller shows their friends (the weekly score, private mode, chosen category scores).
extension SocialServiceHandler {
    /// The paths UpdateSharingSettings changes.
    static let sharingPaths = ["share_weekly_score", "private_mode", "shared_category_ids"]

    func getSharingSettings(request: Habitflow_Social_V1_GetSharingSettingsRequest, context: ServerContext)
        async throws -> Habitflow_Social_V1_SharingSettings
    {
        let user = try await caller()
        return try await store.sharingSettings(of: user.id).proto
    }

    /// A partial update: the mask must name at least one field and only fields this method changes (strict, so a
    /// client's typo never passes as "nothing to change"). Categories are checked with habits in one call.
    func updateSharingSettings(request: Habitflow_Social_V1_UpdateSharingSettingsRequest, context: ServerContext)
        async throws -> Habitflow_Social_V1_SharingSettings
    {
        var validator = RequestValidator()
        let paths = request.updateMask.paths
        let known = Self.sharingPaths.joined(separator: ", ")
        if paths.isEmpty {
            validator.reject("update_mask", "is required: name the fields to change (\(known))")
        }
        for (index, path) in paths.enumerated() where !Self.sharingPaths.contains(path) {
            validator.reject(
                "update_mask.paths[\(index)]", "\(path) is not a field UpdateSharingSettings changes (\(known))")
        }
        var changes = SharingChanges()
        let settings = request.settings
        for path in Set(paths) {
            switch path {
            case "share_weekly_score": changes.shareWeeklyScore = settings.shareWeeklyScore
            case "private_mode": changes.privateMode = settings.privateMode
            case "shared_category_ids":
                changes.sharedCategoryIDs = validator.sharedCategoryIDs(
                    settings.sharedCategoryIds, field: "settings.shared_category_ids")
            default: break
            }
        }
        try validator.check()
        let user = try await caller()
        if let categoryIDs = changes.sharedCategoryIDs, !categoryIDs.isEmpty {
            let live = try await leaderboards.scores.liveCategories(
                of: user.id, options: CallOptions().propagating(from: context))
            if let missing = categoryIDs.first(where: { !live.contains($0) }) {
                throw SharingError.categoryNotFound(missing)
            }
        }
        return try await store.updateSharingSettings(user: user.id, changes, now: clock.now).proto
    }
}

extension RequestValidator {
    /// 0 to ``SharingRules/maximumSharedCategories`` category ids, no repeats, in the order the user chose.
    mutating func sharedCategoryIDs(_ texts: [String], field: String) -> [UUID] {
        if texts.count > SharingRules.maximumSharedCategories {
            reject(field, "shares at most \(SharingRules.maximumSharedCategories) categories, got \(texts.count)")
            return []
        }
        var seen: Set<UUID> = []
        return texts.enumerated().map { index, text in
            let categoryID = self.id(text, field: "\(field)[\(index)]")
            if categoryID != UUID.min, !seen.insert(categoryID).inserted {
                reject("\(field)[\(index)]", "repeats an earlier category")
            }
            return categoryID
        }
    }
}

extension SharingSettings {
    var proto: Habitflow_Social_V1_SharingSettings {
        .with {
            $0.shareWeeklyScore = shareWeeklyScore
            $0.privateMode = privateMode
            $0.sharedCategoryIds = sharedCategoryIDs.map(\.lowercasedString)
            if let updatedAt { $0.updateTime = Google_Protobuf_Timestamp(date: updatedAt) }
        }
    }
}
