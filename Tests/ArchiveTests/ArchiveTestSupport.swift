import Foundation
import HabitFlowTestSupport
import Testing

/// Runs a Python script (`/usr/bin/python3 -c script arguments...`) and returns its output; a non-zero exit fails the
/// test with that output.
func python(_ script: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws
    -> String
{
    let result = try await run("/usr/bin/python3", ["-c", script] + arguments)
    #expect(result.status == 0, "python3 failed: \(result.output)", sourceLocation: sourceLocation)
    return result.output
}

/// A folder of its own under the system's temporary folder, removed by ``remove()``.
struct ScratchFolder {
    let url: URL

    init(_ label: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("habitflow-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Deterministic pseudo-random bytes (xorshift64*), so a failing run can be repeated exactly.
struct TestRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(count + 8)
        while result.count < count {
            let word = next()
            for shift in stride(from: 0, to: 64, by: 8) { result.append(UInt8(truncatingIfNeeded: word >> shift)) }
        }
        return Array(result.prefix(count))
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
