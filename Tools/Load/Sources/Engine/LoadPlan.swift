/// How a run is paced and bounded: everything the engine needs besides the scenario.
public struct LoadPlan: Sendable, Hashable {
    public enum Pacing: Sendable, Hashable, CustomStringConvertible {
        /// Every user sends its next request as soon as the previous one ended. Latency is the time each request
        /// took; a stalled server also slows the sending, so stalls are under-counted (coordinated omission).
        case closedLoop
        /// Requests are sent at a fixed rate on a fixed schedule, whatever the server does. Latency is counted from
        /// each request's intended send time, so time a request waited to be sent is counted too.
        case openLoop(ratePerSecond: Double)

        public var description: String {
            switch self {
            case .closedLoop: "closed loop"
            case .openLoop(let rate): "open loop at \(formatRate(rate)) req/s"
            }
        }
    }

    public var pacing: Pacing = .closedLoop
    /// Virtual users. In a closed loop each runs its own request loop; in an open loop each request takes an idle
    /// user (and waits, late, when none is idle).
    public var users = 10
    /// Connections to the target; requests go to them round-robin.
    public var connections = 1
    /// Requests in flight at most on one connection; more wait (their wait counts in the latency).
    public var streamsPerConnection = 100
    /// How long the measured part runs; with ``requests`` too, whichever ends first.
    public var duration: Duration? = .seconds(10)
    /// How many requests the measured part sends.
    public var requests: Int?
    /// Load applied before the measurement starts, not counted.
    public var warmUp: Duration = .zero
    public var mix: OperationMix
    /// Seeds the draws of operations, so two runs send the same sequence.
    public var seed: UInt64 = 1
    /// Users prepared (signed up, logged in) at once before the run.
    public var setupConcurrency = 32
    /// Connections opened at once before the run.
    public var connectConcurrency = 128

    public init(mix: OperationMix) {
        self.mix = mix
    }

    /// Checks the plan is runnable; the message names the option at fault.
    public func validate() throws(PlanError) {
        if case .openLoop(let rate) = pacing, !(rate > 0 && rate.isFinite) {
            throw PlanError("--rate must be a positive number of requests per second")
        }
        guard users >= 1 else { throw PlanError("--users must be at least 1") }
        guard connections >= 1 else { throw PlanError("--connections must be at least 1") }
        guard streamsPerConnection >= 1 else { throw PlanError("--streams-per-connection must be at least 1") }
        guard duration != nil || requests != nil else { throw PlanError("give --duration, --requests or both") }
        if let duration, duration <= .zero { throw PlanError("--duration must be longer than 0") }
        if let requests, requests < 1 { throw PlanError("--requests must be at least 1") }
        guard warmUp >= .zero else { throw PlanError("--warm-up cannot be negative") }
        guard setupConcurrency >= 1, connectConcurrency >= 1 else { throw PlanError("concurrency must be at least 1") }
    }
}

public struct PlanError: Error, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The fixed send schedule of an open loop: request `k` is meant to go at `k / rate` seconds after the start,
/// whatever happened to the requests before it (wrk2's constant throughput model).
public struct OpenLoopSchedule: Sendable, Hashable {
    public let ratePerSecond: Double

    public init(ratePerSecond: Double) {
        precondition(ratePerSecond > 0, "the rate must be positive")
        self.ratePerSecond = ratePerSecond
    }

    /// When request `index` (from 0) is meant to be sent, counted from the start of the schedule.
    public func intendedOffset(ofRequest index: Int) -> Duration {
        // Computed from the index each time, never by adding intervals, so rounding does not drift.
        .nanoseconds(Int64((Double(index) * 1e9 / ratePerSecond).rounded()))
    }

    /// How many requests are meant to be sent in the first `duration` of the schedule.
    public func requestCount(in duration: Duration) -> Int {
        Int((duration.seconds * ratePerSecond - 1e-9).rounded(.up))
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole microseconds, never negative.
    var microseconds: UInt64 {
        let (seconds, attoseconds) = components
        let value = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        return value > 0 ? UInt64(value) : 0
    }
}

func formatRate(_ rate: Double) -> String {
    rate == rate.rounded() && rate < 1e15 ? String(Int(rate)) : String(format: "%.1f", rate)
}
