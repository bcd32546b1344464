internal import Foundation
internal import HabitFlowPostgres

/// A row of `signing_keys`, its private key still sealed.
struct SealedSigningKey: Sendable {
    var keyID: String
    var publicKey: Data
    var sealedPrivateKey: Data
    var activateAt: Date
    var notAfter: Date?
}

/// `signing_keys`: the access-token signing keys every replica shares (``SigningKeyRing`` opens and caches them).
extension AuthStore {
    /// Every key, by activation.
    func signingKeys() async throws -> [SealedSigningKey] {
        try await pool.query(
            """
            SELECT key_id, public_key, sealed_private_key, activate_at, not_after FROM signing_keys \
            ORDER BY activate_at
            """
        ).map { row in
            SealedSigningKey(
                keyID: try row.decode("key_id"), publicKey: try row.decode("public_key"),
                sealedPrivateKey: try row.decode("sealed_private_key"), activateAt: try row.decode("activate_at"),
                notAfter: try row.decode("not_after"))
        }
    }

    /// Adds the key `rotation` asks for at `now`, if any, under a transaction-scoped advisory lock, so concurrent
    /// replicas add one between them. `makeKey` makes the new key (sealed) for an activation time. Returns it.
    func addSigningKey(
        now: Date, rotation: KeyRotationPolicy, makeKey: (Date) throws -> (keyID: String, publicKey: Data, sealed: Data)
    ) async throws -> SealedSigningKey? {
        try await pool.transaction { transaction in
            try await transaction.execute("SELECT pg_advisory_xact_lock(hashtext('habitflow.auth.signing_keys'))")
            // Looked at again under the lock: another replica may have added the key meanwhile.
            let schedule = try await transaction.query(
                "SELECT key_id, activate_at FROM signing_keys ORDER BY activate_at"
            ).map { ScheduledKey(keyID: try $0.decode("key_id"), activateAt: try $0.decode("activate_at")) }
            guard let change = rotation.change(in: schedule, now: now) else { return nil }
            let key = try makeKey(change.activateAt)
            try await transaction.execute(
                """
                INSERT INTO signing_keys (key_id, public_key, sealed_private_key, created_at, activate_at, retire_at, \
                not_after) VALUES (\(key.keyID), \(key.publicKey), \(key.sealed), \(now), \
                \(change.activateAt), \(change.retireAt as Date?), \(change.notAfter as Date?))
                """)
            if let retiring = change.retiring, let notAfter = change.retiredNotAfter {
                try await transaction.execute(
                    """
                    UPDATE signing_keys SET retire_at = \(change.activateAt), not_after = \(notAfter) \
                    WHERE key_id = \(retiring)
                    """)
            }
            return SealedSigningKey(
                keyID: key.keyID, publicKey: key.publicKey, sealedPrivateKey: key.sealed,
                activateAt: change.activateAt, notAfter: change.notAfter)
        }
    }

    /// Removes keys that stopped verifying before `cutoff`.
    func deleteSigningKeys(notAfterBefore cutoff: Date) async throws {
        try await pool.execute("DELETE FROM signing_keys WHERE not_after < \(cutoff)")
    }
}
