import Foundation

/// CPU time of processes from /proc, for a benchmark's "CPU µs per request" figures: they transfer between a quiet
/// and a busy machine where rates and latencies do not.
public enum ProcessCPU {
    /// User plus system CPU seconds of a process so far; 0 when it cannot be read (the process is gone).
    public static func seconds(_ pid: Int32) -> Double {
        guard let fields = statFields(pid), fields.count > 12, let user = Double(fields[11]),
            let system = Double(fields[12])
        else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The postmaster's CPU plus that of its live children (the backends serving the service and the benchmark).
    public static func postgresSeconds(postmaster: Int32) -> Double {
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var total = seconds(postmaster)
        for name in processes {
            guard let pid = Int32(name), let fields = statFields(pid), fields.count > 1, Int32(fields[1]) == postmaster
            else { continue }
            total += seconds(pid)
        }
        return total
    }

    /// The fields of /proc/PID/stat after "pid (comm)", so the state is the first (field 3 of proc(5)).
    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: end)...].split(separator: " ")
    }
}
