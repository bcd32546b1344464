internal import HabitFlowLocking

/// Token buckets by key (a client address, an account): each key may make `burst` calls at once and
/// `perSecond` on average. A refused call learns how long until a token is back.
///
/// Memory stays bounded: buckets that have refilled completely hold no information and are dropped when the table
/// grows past `sweepThreshold`.
final class RateLimiter<Key: Hashable & Sendable>: Sendable {
    enum Decision: Equatable {
        case allowed
        case limited(retryAfter: Duration)
    }

    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private let limit: GatewayConfiguration.RateLimit
    private let sweepThreshold: Int
    private let buckets = Locked<[Key: Bucket]>([:])

    init(limit: GatewayConfiguration.RateLimit, sweepThreshold: Int = 10_000) {
        self.limit = limit
        self.sweepThreshold = sweepThreshold
    }

    /// Takes one token from `key`'s bucket, or says when one will be there.
    func acquire(_ key: Key, now: ContinuousClock.Instant = .now) -> Decision {
        let limit = self.limit
        return buckets.withLock { buckets in
            if buckets.count >= sweepThreshold { Self.dropFullBuckets(&buckets, limit: limit, now: now) }
            var bucket = buckets[key] ?? Bucket(tokens: limit.burst, updated: now)
            bucket.tokens = Self.refilled(bucket, limit: limit, now: now)
            bucket.updated = now
            let decision: Decision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = .allowed
            } else {
                decision = .limited(retryAfter: .seconds((1 - bucket.tokens) / limit.perSecond))
            }
            buckets[key] = bucket
            return decision
        }
    }

    /// Gives back the token an allowed call took, for a call that failed before it cost anything (an export whose
    /// parts could not be gathered), so the client may retry at once.
    func giveBack(_ key: Key) {
        let burst = limit.burst
        buckets.withLock { buckets in
            guard var bucket = buckets[key] else { return }
            bucket.tokens = min(burst, bucket.tokens + 1)
            buckets[key] = bucket
        }
    }

    /// Keys currently tracked (for tests of the sweep).
    var trackedKeys: Int { buckets.withLock { $0.count } }

    private static func refilled(_ bucket: Bucket, limit: GatewayConfiguration.RateLimit, now: ContinuousClock.Instant)
        -> Double
    {
        let elapsed = now - bucket.updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return min(limit.burst, bucket.tokens + max(seconds, 0) * limit.perSecond)
    }

    private static func dropFullBuckets(
        _ buckets: inout [Key: Bucket], limit: GatewayConfiguration.RateLimit, now: ContinuousClock.Instant
    ) {
        buckets = buckets.filter { refilled($0.value, limit: limit, now: now) < limit.burst }
    }
}
