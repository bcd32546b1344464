import Foundation
import HabitFlowHabitsProtos
import HabitFlowSocial
import HabitFlowSocialProtos
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

/// What the sharing and leaderboard tests do as a user.
extension TestUser {
    func habitCategories() async throws -> [Habitflow_Habits_V1_Category] {
        try await habits.listCategories(.init(), options: options).categories
    }

    func habitCategory(_ name: String) async throws -> Habitflow_Habits_V1_Category {
        try #require(try await habitCategories().first { $0.name == name }, "no category \(name)")
    }

    func createHabit(_ name: String, target: Int32, category: String? = nil) async throws
        -> Habitflow_Habits_V1_Habit
    {
        try await habits.createHabit(
            .with {
                $0.name = name
                $0.weeklyTarget = target
                if let category { $0.categoryID = category }
            }, options: options)
    }

    func sharing() async throws -> Habitflow_Social_V1_SharingSettings {
        try await social.getSharingSettings(.init(), options: options)
    }

    @discardableResult
    func updateSharing(
        _ paths: [String], _ change: (inout Habitflow_Social_V1_SharingSettings) -> Void
    ) async throws -> Habitflow_Social_V1_SharingSettings {
        var settings = Habitflow_Social_V1_SharingSettings()
        change(&settings)
        return try await social.updateSharingSettings(
            .with { [settings] in
                $0.settings = settings
                $0.updateMask = Google_Protobuf_FieldMask(protoPaths: paths)
            }, options: options)
    }

    func leaderboard(pageSize: Int32 = 0, pageToken: String = "") async throws -> Habitflow_Social_V1_Leaderboard {
        try await social.getLeaderboard(
            .with {
                $0.pageSize = pageSize
                $0.pageToken = pageToken
            }, options: options)
    }
}
