internal import HabitFlowCrypto
internal import HabitFlowLocking
internal import NIOCore
internal import NIOPosix

#if canImport(Glibc)
internal import Glibc
#endif

/// bcrypt on a dedicated thread pool.
///
/// A cost-12 hash is about a quarter of a second of CPU. Run on a SwiftNIO event loop it would stall every
/// connection of that loop, and on Swift's cooperative pool it would starve other tasks, so hashing runs on its own
/// threads, one per core: logins queue for a thread while other RPCs keep their latency
/// (Benchmarks/auth.sh measures it). The threads also run at a lower scheduling priority (nice +10), so when logins
/// saturate every core the event loops still get the CPU first. Work still queued when its call is cancelled
/// (deadline, client gone) is dropped.
public final class PasswordHasher: Sendable {
    /// The bcrypt cost of new hashes (2^cost rounds).
    public let cost: Int
    private let threads: NIOThreadPool
    /// A hash of a random password at `cost`, verified against when there is no real hash to check (unknown
    /// account, account without a password) so that such answers take as long as a wrong password.
    private let dummyHash = Locked<String?>(nil)

    /// - Parameters:
    ///   - cost: default 12, the production cost; tests may lower it to save time.
    ///   - threadCount: default one per core.
    public init(cost: Int? = nil, threadCount: Int? = nil) {
        self.cost = cost ?? BCrypt.defaultCost
        self.threads = NIOThreadPool(numberOfThreads: max(1, threadCount ?? System.coreCount))
        threads.start()
    }

    /// Stops the threads; hashing afterwards throws.
    public func shutdown() async {
        try? await threads.shutdownGracefully()
    }

    /// A new `$2b$` hash of `password` with a random salt.
    func hash(_ password: String) async throws -> String {
        let cost = self.cost
        return try await threads.runIfActive {
            lowerThreadPriority()
            return try BCrypt.hash(password, cost: cost)
        }
    }

    /// Whether `password` matches `hash` (constant-time comparison inside). With no hash, checks against a dummy
    /// hash of the same cost and returns false, taking as long as a real check.
    func verify(_ password: String, against hash: String?) async throws -> Bool {
        guard let hash else {
            let dummy = try await self.dummy()
            _ = try await threads.runIfActive {
                lowerThreadPriority()
                return BCrypt.verify(password, against: dummy)
            }
            return false
        }
        return try await threads.runIfActive {
            lowerThreadPriority()
            return BCrypt.verify(password, against: hash)
        }
    }

    /// The dummy hash, made on first use.
    func dummy() async throws -> String {
        if let dummy = dummyHash.withLock({ $0 }) { return dummy }
        let made = try await hash(String(decoding: SecureRandom.bytes(16).map { ($0 % 26) + 97 }, as: UTF8.self))
        return dummyHash.withLock { stored in
            if let stored { return stored }
            stored = made
            return made
        }
    }
}

/// Makes the calling thread (a hashing thread) yield to the event loops: on Linux `PRIO_PROCESS` with id 0 sets the
/// calling thread's nice value. Raising it needs no privilege; later calls find it raised already (a cheap syscall
/// next to a bcrypt).
private func lowerThreadPriority() {
    #if canImport(Glibc)
    let which = __priority_which_t(PRIO_PROCESS.rawValue)
    if getpriority(which, 0) < hashingNiceness { _ = setpriority(which, 0, hashingNiceness) }
    #endif
}

private let hashingNiceness: Int32 = 10
