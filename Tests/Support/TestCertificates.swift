internal import Foundation

/// A throwaway PKI for tests, made once per test run with the `openssl` command line in a temporary directory.
///
/// `ca` issues `server` (for `localhost` and `127.0.0.1`) and `client`; `rogueCA` issues `rogueServer`, a
/// certificate for the same names that our clients must refuse. Shared by every test target that needs TLS.
public struct TestCertificates: Sendable {
    public struct Identity: Sendable {
        public var certificatePath: String
        public var privateKeyPath: String
    }

    public var directory: String
    public var caCertificatePath: String
    public var server: Identity
    public var client: Identity
    public var rogueServer: Identity

    /// Made on first use and shared by every test.
    public static let shared: TestCertificates = {
        do {
            return try make()
        } catch {
            fatalError("cannot create test certificates: \(error)")
        }
    }()

    public static func make() throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("habitflow-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        func path(_ name: String) -> String { "\(directory)/\(name)" }

        func makeCA(_ name: String, commonName: String) throws {
            try runOpenSSL(
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", path("\(name).key"), "-out", path("\(name).pem"), "-days", "2",
                    "-subj", "/CN=\(commonName)",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                ], in: directory)
        }

        func issue(_ name: String, by ca: String, commonName: String, extensions: String) throws -> Identity {
            try runOpenSSL(
                [
                    "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(commonName)",
                ], in: directory)
            try extensions.write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
            try runOpenSSL(
                [
                    "x509", "-req", "-in", path("\(name).csr"), "-CA", path("\(ca).pem"), "-CAkey", path("\(ca).key"),
                    "-CAcreateserial", "-out", path("\(name).pem"), "-days", "2", "-extfile", path("\(name).ext"),
                ], in: directory)
            return Identity(certificatePath: path("\(name).pem"), privateKeyPath: path("\(name).key"))
        }

        let serverExtensions = """
            basicConstraints=CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth
            subjectAltName=DNS:localhost,IP:127.0.0.1

            """
        let clientExtensions = """
            basicConstraints=CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=clientAuth

            """
        try makeCA("ca", commonName: "HabitFlow Test CA")
        try makeCA("rogue-ca", commonName: "Rogue Test CA")
        return TestCertificates(
            directory: directory,
            caCertificatePath: path("ca.pem"),
            server: try issue("server", by: "ca", commonName: "localhost", extensions: serverExtensions),
            client: try issue("client", by: "ca", commonName: "habitflow-test-client", extensions: clientExtensions),
            rogueServer: try issue("rogue-server", by: "rogue-ca", commonName: "localhost", extensions: serverExtensions)
        )
    }

    struct CommandFailed: Error, CustomStringConvertible {
        var command: [String]
        var output: String
        var description: String { "\(command.joined(separator: " ")) failed: \(output)" }
    }

    private static func runOpenSSL(_ arguments: [String], in directory: String) throws {
        let result = try runSynchronously("/usr/bin/openssl", arguments, directory: directory)
        guard result.status == 0 else { throw CommandFailed(command: ["openssl"] + arguments, output: result.output) }
    }
}

/// Runs a program to completion and returns its exit status and combined output.
public func runSynchronously(
    _ executable: String,
    _ arguments: [String],
    directory: String? = nil,
    input: String? = nil
) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let stdin = Pipe()
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// ``runSynchronously(_:_:directory:input:)`` on a thread of its own, so the caller's task does not block a
/// cooperative thread.
public func run(_ executable: String, _ arguments: [String], input: String? = nil) async throws -> (
    status: Int32, output: String
) {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try runSynchronously(executable, arguments, input: input) })
        }
    }
}
