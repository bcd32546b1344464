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
            expiresAt: try row.decode("expires_at"), revokedAt: try row.decode("revoked_at"),
            revokeReason: try row.decode("revoke_reason", as: String?.self).map { stored in
                guard let reason = RevokeReason(rawValue: stored) else {
                    throw AuthInvariantFailure("unknown revoke_reason \"\(stored)\" in sessions")
                }
                return reason
            })
    }
}

extension LinkedIdentityRecord {
    /// Decodes a row of `social_identities`.
    init(row: PostgresRow) throws {
        let stored = try row.decode("provider", as: String.self)
        guard let provider = SocialProviderName(rawValue: stored) else {
            throw AuthInvariantFailure("unknown provider \"\(stored)\" in social_identities")
        }
        self.init(
            provider: provider, subject: try row.decode("subject"), email: try row.decode("email"),
            linkedAt: try row.decode("created_at"))
    }
}
