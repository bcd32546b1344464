public import Foundation
public import HabitFlowRPC
internal import HabitFlowInternalCredential

/// One unary method driven by h2load (Debian's nghttp2-client): a load generator written in C that needs a fraction
/// of our RPC client's CPU per call, so the two cores go to the services and Postgres as they would with clients on
/// other machines. h2load cannot read gRPC trailers: a call counts as failed here only when its HTTP status is not
/// 200 (add the calls the service itself counted as failed from its metrics).
public struct H2load {
    public var port: Int
    public var method: MethodDescriptor
    /// The request body: gRPC's 5-byte prefix and the serialized message.
    public var body: Data
    /// Extra request headers, such as the internal credential.
    public var headers: [(String, String)]
    public var concurrency: Int

    public init(port: Int, method: MethodDescriptor, body: Data, headers: [(String, String)], concurrency: Int) {
        self.port = port
        self.method = method
        self.body = body
        self.headers = headers
        self.concurrency = concurrency
    }

    /// Runs `seconds` of calls (`concurrency` streams on one connection); returns each call's latency in
    /// nanoseconds and the calls whose HTTP status was not 200.
    public func run(seconds: Int) throws -> (latencies: [Int64], non200: Int) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("h2load-\(getpid())-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bodyFile = folder.appendingPathComponent("body.bin")
        try body.write(to: bodyFile)
        let log = folder.appendingPathComponent("run.log")
        var arguments = ["h2load", "-D", String(seconds), "--log-file", log.path]
        arguments += ["-t", "1", "-c", "1", "-m", String(concurrency), "-d", bodyFile.path]
        arguments += ["-H", "content-type: application/grpc", "-H", "te: trailers"]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("http://127.0.0.1:\(port)\(method.path)")
        let h2load = Process()
        h2load.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        h2load.arguments = arguments
        h2load.standardOutput = FileHandle.nullDevice
        try h2load.run()
        h2load.waitUntilExit()
        guard h2load.terminationStatus == 0 else { throw H2loadFailed(status: h2load.terminationStatus) }
        // Each line: start time (µs since the epoch), HTTP status, time to the response's end (µs).
        var latencies: [Int64] = []
        var non200 = 0
        for line in try String(contentsOf: log, encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: "\t")
            guard fields.count >= 3, let micros = Int64(fields[2]) else { continue }
            if fields[1] != "200" { non200 += 1 }
            latencies.append(micros * 1000)
        }
        return (latencies, non200)
    }

    /// The headers of a call the gateway signs on behalf of `user` (valid for five minutes, far longer than a run).
    public static func gatewayCredential(for user: UUID, method: MethodDescriptor, secret: String) -> [(String, String)] {
        InternalCredential(secret: secret).metadata(for: CallerIdentity(caller: "gateway", userID: user), method: method)
            .compactMap { entry in
                guard case .text(let value) = entry.value else { return nil }
                return (entry.key, value)
            }
    }

    /// User plus system CPU seconds of this process's children that have ended (h2load after each run).
    public static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}

public struct H2loadFailed: Error, CustomStringConvertible {
    public var status: Int32
    public var description: String { "h2load exited with status \(status)" }
}
