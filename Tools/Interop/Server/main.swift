// interop-server: grpc/grpc's interop TestService on our RPC runtime, with health and reflection.
//
//   interop-server [--host 127.0.0.1] [--port 0] [--tls-cert cert.pem --tls-key key.pem]
//
// Port 0 picks a free port; the server prints `listening on HOST:PORT` once it accepts connections.
import GRPCInteropTesting
import HabitFlowGRPCSideServiceProtos
import HabitFlowRPC
import HabitFlowRPCServer
import HabitFlowRPCSideServices
import HabitFlowTLS
import Logging
import Dispatch

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

struct Options {
    var host = "127.0.0.1"
    var port = 0
    var certificate: String?
    var key: String?

    init(_ arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--host": host = value
            case "--port":
                guard let number = Int(value), (0...65535).contains(number) else { throw UsageError("bad port \(value)") }
                port = number
            case "--tls-cert": certificate = value
            case "--tls-key": key = value
            default: throw UsageError("unknown option \(flag)")
            }
        }
        guard (certificate == nil) == (key == nil) else { throw UsageError("--tls-cert and --tls-key go together") }
    }
}

struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

let options: Options
do {
    options = try Options(Array(CommandLine.arguments.dropFirst()))
} catch {
    fputs("interop-server: \(error)\nusage: interop-server [--host H] [--port P] [--tls-cert PEM --tls-key PEM]\n", stderr)
    exit(2)
}

LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
var logger = Logger(label: "interop-server")
logger.logLevel = .notice

let health = HealthStatusRegistry()
let testService = InteropTestService()
let servedNames = [testService.serviceName, Grpc_Health_V1_Health.name] + ReflectionService.serviceNames
let reflection = try ReflectionService(
    descriptorSets: [GRPCInteropTestingDescriptorSet.base64, GRPCSideServicesDescriptorSet.base64],
    serviceNames: servedNames)

var configuration = RPCServerConfiguration(host: options.host, port: options.port)
if let certificate = options.certificate, let key = options.key {
    configuration.tls = .server(certificateChain: .file(certificate), privateKey: .file(key))
}
let server = RPCServer(
    configuration: configuration,
    services: [testService, HealthService(registry: health)] + reflection.services,
    logger: logger)
try await server.start()
health.setStatus(.serving)
health.setStatus(.serving, for: testService.serviceName)

let address = server.localAddress
print("listening on \(address?.ipAddress ?? options.host):\(address?.port ?? options.port)")
fflush(stdout)

// SIGTERM and SIGINT stop the server gracefully.
let signals = [SIGTERM, SIGINT].map { signalNumber in
    signal(signalNumber, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
    source.setEventHandler {
        Task {
            health.markAllNotServing()
            await server.shutdown()
        }
    }
    source.resume()
    return source
}
try await server.run()
_ = signals
