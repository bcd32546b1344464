internal import Foundation
internal import HabitFlowCrypto

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

/// A key's place in the schedule, as the rotation decides on it.
struct ScheduledKey: Sendable {
    var keyID: String
    var activateAt: Date
}

/// A key to add to the schedule.
struct KeyScheduleChange: Sendable, Equatable {
    var activateAt: Date
    /// When it stops signing and stops verifying: set for a first key that only fills in until a later one.
    var retireAt: Date?
    var notAfter: Date?
    /// The key that signs until `activateAt`: it retires then and verifies until `retiredNotAfter`.
    var retiring: String?
    var retiredNotAfter: Date?
}

/// When signing keys take over from each other.
///
/// The key that signs at time t is the one with the latest `activate_at` not after t. When the signing key has
/// served ``rotationInterval`` (minus the publication lead) the next key is added, activating ``publicationLead``
/// later: verifiers see it published before any token it signs reaches them. The old key keeps verifying until
/// `activate_at` of its successor plus the access-token lifetime.
struct KeyRotationPolicy: Sendable {
    var rotationInterval: Duration
    var publicationLead: Duration
    var accessTokenLifetime: Duration

    /// The key that signs at `now`.
    static func current(in keys: [StoredSigningKey], at now: Date) -> StoredSigningKey? {
        keys.filter { $0.activateAt <= now }.max { $0.activateAt < $1.activateAt }
    }

    /// Whether a key must be added: none signs, or the signing one is due for a successor that is not published.
    func needsNewKey(_ keys: [StoredSigningKey], now: Date) -> Bool {
        guard let current = Self.current(in: keys, at: now) else { return true }
        if keys.contains(where: { $0.activateAt > current.activateAt }) { return false }  // the next one is published
        return now >= due(after: current.activateAt)
    }

    /// The key to add to `schedule` (every key, by `activate_at`) at `now`, or nil when none is due.
    func change(in schedule: [ScheduledKey], now: Date) -> KeyScheduleChange? {
        let lifetime = accessTokenLifetime.timeInterval
        guard let active = schedule.last(where: { $0.activateAt <= now }) else {
            // No key signs now: the very first key (no verifier knows any key yet, nothing to wait for), or only
            // keys scheduled for later (the clock went back). One that signs at once, until the next takes over.
            let next = schedule.first { $0.activateAt > now }?.activateAt
            return KeyScheduleChange(activateAt: now, retireAt: next, notAfter: next?.addingTimeInterval(lifetime))
        }
        if schedule.contains(where: { $0.activateAt > active.activateAt }) { return nil }  // the next one is published
        guard now >= due(after: active.activateAt) else { return nil }
        let activateAt = now.addingTimeInterval(publicationLead.timeInterval)
        return KeyScheduleChange(
            activateAt: activateAt, retiring: active.keyID, retiredNotAfter: activateAt.addingTimeInterval(lifetime))
    }

    private func due(after activateAt: Date) -> Date {
        activateAt.addingTimeInterval(rotationInterval.timeInterval - publicationLead.timeInterval)
    }
}
