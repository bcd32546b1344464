// habitflow-healthcheck HOST:PORT [SERVICE]: asks grpc.health.v1.Health/Check and exits 0 when the answer is SERVING,
// 1 otherwise (not serving, no answer within 2 s). The container health check of the compose stack; no grpcurl needed.
import Foundation
import HabitFlowGRPCSideServiceProtos
import HabitFlowRPC
import HabitFlowRPCClient
import Logging

let arguments = CommandLine.arguments.dropFirst()
guard let address = arguments.first, let colon = address.lastIndex(of: ":"),
    let port = Int(address[address.index(after: colon)...])
else {
    FileHandle.standardError.write(Data("usage: habitflow-healthcheck HOST:PORT [SERVICE]\n".utf8))
    exit(2)
}
let host = String(address[..<colon])
let service = arguments.dropFirst().first ?? ""

var configuration = RPCChannelConfiguration(host: host, port: port)
configuration.connectTimeout = .seconds(2)
configuration.retry.maxAttempts = 1
let channel = try RPCChannel(
    configuration: configuration, logger: Logger(label: "healthcheck", factory: { _ in SwiftLogNoOpLogHandler() }))
let status: Grpc_Health_V1_HealthCheckResponse.ServingStatus
do {
    status = try await Grpc_Health_V1_Health.Client(transport: channel)
        .check(.with { $0.service = service }, options: CallOptions(timeout: .seconds(2))).status
} catch {
    print("\(address): \(error)")
    exit(1)
}
await channel.close()
print("\(address)\(service.isEmpty ? "" : " \(service)"): \(status)")
exit(status == .serving ? 0 : 1)
