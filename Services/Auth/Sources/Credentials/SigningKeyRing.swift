internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowPostgres
internal import HabitFlowTokens
internal import Logging
internal import Synchronization

/// An Ed25519 key that signs access tokens, with its schedule.
struct StoredSigningKey: Sendable {
    var keyID: String
    var publicKey: Ed25519.PublicKey
    /// Only loaded for keys whose private half could be opened with the key-encryption key.
    var privateKey: Ed25519.PrivateKey
    var activateAt: Date
    /// When it stops verifying (the last token it signed has expired); nil while it signs.
    var notAfter: Date?
}

/// The access-token signing keys in `signing_keys`, shared by every replica, and their rotation.
///
/// The key that signs at time t is the one with the latest `activate_at` not after t. When the signing key has
/// served ``AuthSettings/keyRotationInterval`` (minus the publication lead) a replica adds the next key, activating
/// ``AuthSettings/keyPublicationLead`` later: verifiers see it published before any token it signs reaches them.
/// The old key keeps verifying until `activate_at` of its successor plus the access-token lifetime.
///
/// Private keys are stored sealed with AES-256-GCM under ``AuthSettings/keyEncryptionKey`` (from the environment,
/// never in the database), bound to their key id; they are never logged.
final class SigningKeyRing: Sendable {
    private let pool: PostgresPool
    private let settings: AuthSettings
    private let logger: Logger
    /// Keys as last read, and when; re-read at most every ``cacheLifetime``.
    private let cache = Mutex<(keys: [StoredSigningKey], loadedAt: ContinuousClock.Instant)?>(nil)
    private let cacheLifetime: Duration = .seconds(30)

    init(pool: PostgresPool, settings: AuthSettings, logger: Logger) {
        self.pool = pool
        self.settings = settings
        self.logger = logger
    }

    /// The key to sign with now, adding the first key or the next one when it is due.
    func signingKey() async throws -> StoredSigningKey {
        let now = settings.clock.now()
        var keys = try await loadKeys()
        if needsNewKey(keys, now: now) {
            try await addKey(now: now)
            keys = try await loadKeys(force: true)
        }
        guard let key = Self.current(in: keys, at: now) else {
            throw AuthInvariantFailure("no signing key is active after adding one")
        }
        return key
    }

    /// The keys verifiers need now: pending, signing and retired-but-still-verifying ones.
    func verificationKeys() async throws -> [StoredSigningKey] {
        // Makes sure a first key (or a due next key) exists, so the gateway never gets an empty set.
        _ = try await signingKey()
        let now = settings.clock.now()
        return try await loadKeys().filter { key in key.notAfter.map { $0 > now } ?? true }
    }

    /// Removes keys nothing can verify any more.
    func deleteExpiredKeys() async throws {
        let cutoff = settings.clock.now().addingTimeInterval(-3600)
        try await pool.execute("DELETE FROM signing_keys WHERE not_after < \(cutoff)")
    }

    static func current(in keys: [StoredSigningKey], at now: Date) -> StoredSigningKey? {
        keys.filter { $0.activateAt <= now }.max { $0.activateAt < $1.activateAt }
    }

    private func needsNewKey(_ keys: [StoredSigningKey], now: Date) -> Bool {
        guard let current = Self.current(in: keys, at: now) else { return true }
        if keys.contains(where: { $0.activateAt > current.activateAt }) { return false }  // the next one is published
        let due = current.activateAt.addingTimeInterval(
            settings.keyRotationInterval.timeInterval - settings.keyPublicationLead.timeInterval)
        return now >= due
    }

    private func loadKeys(force: Bool = false) async throws -> [StoredSigningKey] {
        if !force, let cached = cache.withLock({ $0 }), ContinuousClock.now - cached.loadedAt < cacheLifetime {
            return cached.keys
        }
        let rows = try await pool.query(
            """
            SELECT key_id, public_key, sealed_private_key, activate_at, not_after FROM signing_keys \
            ORDER BY activate_at
            """
        )
        var keys: [StoredSigningKey] = []
        for row in rows {
            let keyID = try row.decode("key_id", as: String.self)
            do {
                let sealed = try row.decode("sealed_private_key", as: Data.self)
                let seed = try AES256GCM.open(sealed, key: settings.keyEncryptionKey, additionalData: Array(keyID.utf8))
                let privateKey = try Ed25519.PrivateKey(rawRepresentation: seed)
                keys.append(
                    StoredSigningKey(
                        keyID: keyID, publicKey: privateKey.publicKey, privateKey: privateKey,
                        activateAt: try row.decode("activate_at"), notAfter: try row.decode("not_after")))
            } catch let error as CryptoError {
                // Sealed under another key-encryption key (a misconfigured replica): unusable here, say so loudly.
                logger.error(
                    "cannot open a signing key: is HABITFLOW_AUTH_KEY_ENCRYPTION_KEY the same on every replica?",
                    metadata: ["key_id": "\(keyID)", "error": "\(error.operation)"])
            }
        }
        cache.withLock { $0 = (keys, ContinuousClock.now) }
        return keys
    }

    /// Adds the next key under a transaction-scoped advisory lock, so concurrent replicas add one between them.
    private func addKey(now exactNow: Date) async throws {
        // Whole seconds: stored at microsecond precision, an instant could come back a hair later than `now` and the
        // key would not count as active yet.
        let now = Date(timeIntervalSince1970: exactNow.timeIntervalSince1970.rounded(.down))
        try await pool.transaction { transaction in
            try await transaction.execute("SELECT pg_advisory_xact_lock(hashtext('habitflow.auth.signing_keys'))")
            // Looked at again under the lock: another replica may have added the key meanwhile.
            let schedule = try await transaction.query(
                "SELECT key_id, activate_at FROM signing_keys ORDER BY activate_at"
            )
            .map {
                (
                    keyID: try $0.decode("key_id", as: String.self),
                    activateAt: try $0.decode("activate_at", as: Date.self)
                )
            }
            let lifetime = settings.accessTokenLifetime.timeInterval
            guard let active = schedule.last(where: { $0.activateAt <= now }) else {
                // No key signs now: the very first key (no verifier knows any key yet, nothing to wait for), or only
                // keys scheduled for later (the clock went back). One that signs at once, until the next takes over.
                let next = schedule.first { $0.activateAt > now }?.activateAt
                try await insertKey(
                    activateAt: now, retireAt: next, notAfter: next?.addingTimeInterval(lifetime), now: now,
                    on: transaction)
                return
            }
            if schedule.contains(where: { $0.activateAt > active.activateAt }) { return }  // the next one is published
            let due = active.activateAt.addingTimeInterval(
                settings.keyRotationInterval.timeInterval - settings.keyPublicationLead.timeInterval)
            guard now >= due else { return }
            let activateAt = now.addingTimeInterval(settings.keyPublicationLead.timeInterval)
            try await insertKey(activateAt: activateAt, retireAt: nil, notAfter: nil, now: now, on: transaction)
            try await transaction.execute(
                """
                UPDATE signing_keys \
                SET retire_at = \(activateAt), not_after = \(activateAt.addingTimeInterval(lifetime)) \
                WHERE key_id = \(active.keyID)
                """)
        }
    }

    private func insertKey(
        activateAt: Date, retireAt: Date?, notAfter: Date?, now: Date, on transaction: PostgresTransaction
    ) async throws {
        let privateKey = try Ed25519.PrivateKey()
        let keyID = Self.makeKeyID()
        let sealed = try AES256GCM.seal(
            privateKey.rawRepresentation, key: settings.keyEncryptionKey, additionalData: Array(keyID.utf8))
        try await transaction.execute(
            """
            INSERT INTO signing_keys (key_id, public_key, sealed_private_key, created_at, activate_at, retire_at, \
            not_after) VALUES (\(keyID), \(Data(privateKey.publicKey.rawRepresentation)), \(Data(sealed)), \(now), \
            \(activateAt), \(retireAt as Date?), \(notAfter as Date?))
            """)
        logger.notice(
            "added an access-token signing key", metadata: ["key_id": "\(keyID)", "activates_at": "\(activateAt)"])
    }

    /// 12 random bytes, base64url: unguessable and short enough for every JWT header.
    private static func makeKeyID() -> String {
        Base64URL.encode(SecureRandom.bytes(12))
    }
}
