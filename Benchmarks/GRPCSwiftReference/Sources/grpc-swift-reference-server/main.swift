// grpc-swift-reference-server: grpc.testing.TestService/UnaryCall on grpc-swift-2 2.4.3 + grpc-swift-nio-transport
// 2.9.2 (HTTP2ServerTransport.Posix), the reference that Benchmarks/server-unary.sh measures our server against.
//
//   grpc-swift-reference-server [--host 127.0.0.1] [--port 0]
//
// Port 0 picks a free port; the server prints `listening on HOST:PORT` once it accepts connections, like
// interop-server. The event loop group has System.coreCount threads, as our RPCServer's default
// (MultiThreadedEventLoopGroup.singleton).
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import GRPCProtobuf
import NIOCore
import NIOPosix

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// UnaryCall only, registered by hand (no protoc-gen-grpc-swift): the same work as our interop service's UnaryCall
/// for a plain request (a zero-filled payload of `response_size` bytes; `response_status` echoed).
struct TestServiceUnaryOnly: RegistrableRPCService {
    static let unaryCall = MethodDescriptor(
        fullyQualifiedService: "grpc.testing.TestService", method: "UnaryCall", type: .unary)

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(
            forMethod: Self.unaryCall,
            deserializer: ProtobufDeserializer<Grpc_Testing_SimpleRequest>(),
            serializer: ProtobufSerializer<Grpc_Testing_SimpleResponse>()
        ) { streamingRequest, context in
            let request = try await ServerRequest(stream: streamingRequest)
            let response = try Self.unaryCall(request.message)
            return StreamingServerResponse(single: ServerResponse(message: response))
        }
    }

    static func unaryCall(_ request: Grpc_Testing_SimpleRequest) throws -> Grpc_Testing_SimpleResponse {
        if request.hasResponseStatus, request.responseStatus.code != 0 {
            let code = RPCError.Code(Status.Code(rawValue: Int(request.responseStatus.code)) ?? .unknown) ?? .unknown
            throw RPCError(code: code, message: request.responseStatus.message)
        }
        return .with {
            $0.payload = .with {
                $0.type = request.responseType
                $0.body = Data(count: Int(max(0, request.responseSize)))
            }
        }
    }
}

func fail(_ message: String) -> Never {
    let line = Array("grpc-swift-reference-server: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(2)
}

var host = "127.0.0.1"
var port = 0
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst() else { fail("\(flag) needs a value") }
    switch flag {
    case "--host": host = value
    case "--port":
        guard let number = Int(value), (0...65535).contains(number) else { fail("bad port \(value)") }
        port = number
    default: fail("unknown option \(flag); usage: grpc-swift-reference-server [--host H] [--port P]")
    }
}

let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
let transport = HTTP2ServerTransport.Posix(
    address: .ipv4(host: host, port: port),
    transportSecurity: .plaintext,
    eventLoopGroup: group)
let server = GRPCServer(transport: transport, services: [TestServiceUnaryOnly()])

try await withThrowingDiscardingTaskGroup { tasks in
    tasks.addTask { try await server.serve() }
    let address = try await transport.listeningAddress
    if let ipv4 = address.ipv4 {
        print("listening on \(ipv4.host):\(ipv4.port)")
    } else {
        print("listening on \(address)")
    }
    fflush(nil)  // all streams: the script waits for the line
}
