/// A weighted mix of named operations, written `mark-done=40,week-view=30,dashboard=20` on the command line.
public struct OperationMix: Sendable, Hashable, CustomStringConvertible {
    public struct Entry: Sendable, Hashable {
        public var operation: String
        public var weight: Int

        public init(_ operation: String, weight: Int) {
            self.operation = operation
            self.weight = weight
        }
    }

    public let entries: [Entry]
    /// Running sums of the weights, for drawing an entry with one random number.
    private let cumulativeWeights: [Int]

    public var totalWeight: Int { cumulativeWeights.last ?? 0 }

    public init(_ entries: [Entry]) throws(MixError) {
        guard !entries.isEmpty else { throw MixError("the mix names no operation") }
        var seen = Set<String>()
        var sum = 0
        var cumulative: [Int] = []
        for entry in entries {
            guard !entry.operation.isEmpty else { throw MixError("an operation name is empty") }
            guard seen.insert(entry.operation).inserted else {
                throw MixError("operation '\(entry.operation)' appears twice in the mix")
            }
            guard entry.weight >= 0 else { throw MixError("the weight of '\(entry.operation)' is negative") }
            sum += entry.weight
            cumulative.append(sum)
        }
        guard sum > 0 else { throw MixError("every weight in the mix is 0") }
        self.entries = entries
        self.cumulativeWeights = cumulative
    }

    /// A mix written in the code (a scenario's default): invalid entries are a programming error.
    public static func fixed(_ entries: KeyValuePairs<String, Int>) -> OperationMix {
        do {
            return try OperationMix(entries.map { Entry($0.key, weight: $0.value) })
        } catch {
            preconditionFailure("invalid built-in mix: \(error)")
        }
    }

    /// Parses `name=weight,name=weight`; a name without `=weight` has weight 1.
    public init(parsing text: String) throws(MixError) {
        var entries: [Entry] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = part.trimmingWhitespace()
            guard !item.isEmpty else { throw MixError("empty entry in mix '\(text)'") }
            let pieces = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pieces[0].trimmingWhitespace()
            var weight = 1
            if pieces.count == 2 {
                let weightText = pieces[1].trimmingWhitespace()
                guard let parsed = Int(weightText), parsed >= 0 else {
                    throw MixError("weight '\(weightText)' of '\(name)' is not a whole number ≥ 0")
                }
                weight = parsed
            }
            entries.append(Entry(name, weight: weight))
        }
        try self.init(entries)
    }

    /// The index of the entry drawn for a uniform random number in `0..<totalWeight`.
    public func entryIndex(forDraw draw: Int) -> Int {
        // First cumulative weight above the draw (binary search: mixes are short, but this is on every request).
        var low = 0
        var high = cumulativeWeights.count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulativeWeights[middle] > draw { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// Draws an entry index with probability proportional to its weight.
    public func pick(using generator: inout some RandomNumberGenerator) -> Int {
        entryIndex(forDraw: Int.random(in: 0..<totalWeight, using: &generator))
    }

    /// Checks every operation exists in `available` and returns, per entry, its index there.
    func resolve(against available: [String], scenario: String) throws(MixError) -> [Int] {
        try entries.map { entry throws(MixError) in
            guard let index = available.firstIndex(of: entry.operation) else {
                throw MixError(
                    "scenario '\(scenario)' has no operation '\(entry.operation)'; it has: "
                        + available.joined(separator: ", "))
            }
            return index
        }
    }

    public var description: String {
        entries.map { "\($0.operation)=\($0.weight)" }.joined(separator: ",")
    }

    public static func == (lhs: OperationMix, rhs: OperationMix) -> Bool { lhs.entries == rhs.entries }
    public func hash(into hasher: inout Hasher) { hasher.combine(entries) }
}

public struct MixError: Error, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// SplitMix64: a small, fast generator with a seed, so a run's sequence of operations can be repeated.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
