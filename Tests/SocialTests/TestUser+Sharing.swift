import Foundation
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowSocial
import HabitFlowSocialProtos
import HabitFlowTestSupport
import SwiftProtobuf
import Testing

/// The social schema as the service's own role sees it, for what the sharing and leaderboard tests set up directly.
enum SocialDatabase {
    static let pool: PostgresPool = {
        var configuration = PostgresPool.Configuration(
            connectionString: (try? TestEnvironment.serviceURL("social")) ?? "")
        configuration.maximumConnections = 2
        return PostgresPool(configuration: configuration, logger: testLogger)
    }()

    static var store: SocialStore { SocialStore(pool: pool) }
}

/// What the sharing and leaderboard tests do as a user.
extension TestUser {
    /// Makes this user and `other` friends by writing both sides of the friendship as the friends' RPCs would (a
    /// stand-in while those RPCs are built on another branch), the users known to the service with their zones.
    func befriendDirectly(_ other: TestUser, zones: [UUID: String] = [:]) async throws {
        try await SocialDatabase.pool.transaction { transaction in
            for user in [self, other] {
                try await transaction.execute(
                    """
                    INSERT INTO users (user_id, time_zone, username, display_name) \
                    VALUES (\(user.id), \(zones[user.id] ?? "UTC"), \(user.username), \(user.displayName)) \
                    ON CONFLICT (user_id) DO NOTHING
                    """)
            }
            for (user, friend) in [(self.id, other.id), (other.id, self.id)] {
                try await transaction.execute(
                    """
                    INSERT INTO friendships (user_id, friend_id, since, change_seq) \
                    VALUES (\(user), \(friend), now(), 0) \
                    ON CONFLICT (user_id, friend_id) DO UPDATE SET deleted_at = NULL
                    """)
            }
        }
    }

    /// Sets the zone the social service keeps for this user (what auth's UserUpdated tells it).
    func setSocialTimeZone(_ zone: String) async throws {
        try await SocialDatabase.pool.execute(
            """
            INSERT INTO users (user_id, time_zone) VALUES (\(id), \(zone)) \
            ON CONFLICT (user_id) DO UPDATE SET time_zone = excluded.time_zone
            """)
    }

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
