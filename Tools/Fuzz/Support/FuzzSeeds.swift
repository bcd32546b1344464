internal import Foundation

/// The seed corpus of a target, written by the target itself: `scripts/fuzz --seeds` runs each fuzz binary with
/// `HABITFLOW_FUZZ_WRITE_SEEDS=<folder>`, and ``writeSeedsIfAsked(_:)`` (called from `LLVMFuzzerInitialize`) writes
/// them there and exits before libFuzzer starts. So the seeds are made by the same code that reads them, and stay
/// valid when a format changes.
public enum FuzzSeeds {
    public static let environmentVariable = "HABITFLOW_FUZZ_WRITE_SEEDS"

    /// When asked through the environment, writes `seeds()` (file name → input) into the folder it names and exits.
    public static func writeSeedsIfAsked(_ seeds: () -> [String: [UInt8]]) {
        guard let folder = ProcessInfo.processInfo.environment[environmentVariable], !folder.isEmpty else { return }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for (name, bytes) in seeds().sorted(by: { $0.key < $1.key }) {
                expect(!name.contains("/"), "a seed name is a file name: \(name)")
                try Data(bytes).write(to: URL(fileURLWithPath: folder).appendingPathComponent(name))
            }
        } catch {
            FileHandle.standardError.write(Data("could not write the seeds into \(folder): \(error)\n".utf8))
            exit(1)
        }
        exit(0)
    }
}
