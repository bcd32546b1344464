internal import Foundation
internal import HabitFlowPostgres

// Rows of the `auth` schema as domain records.

extension UserRecord {
    /// Decodes a row of `user_accounts` (or `users`, without linked providers).
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("id"), email: try row.decode("email"), emailVerified: try row.decode("email_verified"),
            username: try row.decode("username"), displayName: try row.decode("display_name"),
            timeZone: try row.decode("time_zone"), passwordHash: try row.decode("password_hash"),
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"))
        if row.columns.contains(where: { $0.name == "linked_providers" }) {
            linkedProviders = try row.decode("linked_providers")
        }
    }
}

extension SessionRecord {
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("id"), userID: try row.decode("user_id"), deviceID: try row.decode("device_id"),
            deviceName: try row.decode("device_name"), clientAddress: try row.decode("client_address"),
            createdAt: try row.decode("created_at"), lastUsedAt: try row.decode("last_used_at"),
            expiresAt: try row.decode("expires_at"), revokedAt: try row.decode("revoked_at"))
    }
}
