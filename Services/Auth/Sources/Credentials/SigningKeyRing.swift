internal import HabitFlowBase64
internal import Foundation
internal import HabitFlowCrypto
internal import HabitFlowTokens
internal import Logging
internal import HabitFlowLocking

/// The access-token signing keys (`signing_keys`, shared by every replica): opened, cached, and rotated as
/// ``KeyRotationPolicy`` says.
///
/// Private keys are stored sealed with AES-256-GCM under ``AuthSettings/keyEncryptionKey`` (from the environment,
/// never in the database), bound to their key id; they are never logged.
final class SigningKeyRing: Sendable {
    private let store: AuthStore
    private let settings: AuthSettings
    private let logger: Logger
    /// Keys as last read, and when; re-read at most every ``cacheLifetime``.
    private let cache = Locked<(keys: [StoredSigningKey], loadedAt: ContinuousClock.Instant)?>(nil)
    private let cacheLifetime: Duration = .seconds(30)

    init(store: AuthStore, settings: AuthSettings, logger: Logger) {
        self.store = store
        self.settings = settings
        self.logger = logger
    }

    /// The key to sign with now, adding the first key or the next one when it is due.
    func signingKey() async throws -> StoredSigningKey {
        let now = settings.clock.now()
        var keys = try await loadKeys()
        if settings.keyRotation.needsNewKey(keys, now: now) {
            try await addKey(now: now)
            keys = try await loadKeys(force: true)
        }
        guard let key = KeyRotationPolicy.current(in: keys, at: now) else {
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

    private func loadKeys(force: Bool = false) async throws -> [StoredSigningKey] {
        if !force, let cached = cache.withLock({ $0 }), ContinuousClock.now - cached.loadedAt < cacheLifetime {
            return cached.keys
        }
        var keys: [StoredSigningKey] = []
        for row in try await store.signingKeys() {
            do {
                let seed = try AES256GCM.open(
                    Array(row.sealedPrivateKey), key: settings.keyEncryptionKey, additionalData: Array(row.keyID.utf8))
                let privateKey = try Ed25519.PrivateKey(rawRepresentation: seed)
                keys.append(
                    StoredSigningKey(
                        keyID: row.keyID, publicKey: privateKey.publicKey, privateKey: privateKey,
                        activateAt: row.activateAt, notAfter: row.notAfter))
            } catch {
                // Sealed under another key-encryption key (a misconfigured replica): unusable here, say so loudly.
                logger.error(
                    "cannot open a signing key: is HABITFLOW_AUTH_KEY_ENCRYPTION_KEY the same on every replica?",
                    metadata: ["key_id": "\(row.keyID)", "error": "\(error.operation)"])
            }
        }
        cache.withLock { $0 = (keys, ContinuousClock.now) }
        return keys
    }

    /// Adds the next key if it is still due once the store holds the lock.
    private func addKey(now exactNow: Date) async throws {
        // Whole seconds: stored at microsecond precision, an instant could come back a hair later than `now` and the
        // key would not count as active yet.
        let now = Date(timeIntervalSince1970: exactNow.timeIntervalSince1970.rounded(.down))
        let encryptionKey = settings.keyEncryptionKey
        let added = try await store.addSigningKey(now: now, rotation: settings.keyRotation) { _ in
            let privateKey = try Ed25519.PrivateKey()
            let keyID = Self.makeKeyID()
            let sealed = try AES256GCM.seal(
                privateKey.rawRepresentation, key: encryptionKey, additionalData: Array(keyID.utf8))
            return (keyID, Data(privateKey.publicKey.rawRepresentation), Data(sealed))
        }
        if let added {
            logger.notice(
                "added an access-token signing key",
                metadata: ["key_id": "\(added.keyID)", "activates_at": "\(added.activateAt)"])
        }
    }

    /// 12 random bytes, base64url: unguessable and short enough for every JWT header.
    private static func makeKeyID() -> String {
        Base64URL.encode(SecureRandom.bytes(12))
    }
}
