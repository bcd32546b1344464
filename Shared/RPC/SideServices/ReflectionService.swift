internal import HabitFlowBase64
internal import HabitFlowGRPCSideServiceProtos
public import HabitFlowRPC
internal import SwiftProtobuf
internal import Foundation

/// gRPC server reflection, `grpc.reflection.v1` and `grpc.reflection.v1alpha` (grpcurl tries v1, then v1alpha).
///
/// swift-protobuf has no runtime descriptor pool, so the answers come from descriptor sets embedded at generation
/// time (`protoc --descriptor_set_out --include_imports`, see scripts/generate-protos).
public struct ReflectionService: Sendable {
    private let index: DescriptorIndex

    /// - Parameters:
    ///   - descriptorSets: base64 `FileDescriptorSet`s covering every served service and its imports.
    ///   - serviceNames: the services `list_services` reports (the server's registered services).
    ///   - hidingUnlistedServices: also removes every service not in `serviceNames` from the served files, for a
    ///     server whose `.proto` files declare services it does not expose (a gateway: internal services share files
    ///     with public ones, and clients must not even learn their shape).
    public init(descriptorSets: [String], serviceNames: [String], hidingUnlistedServices: Bool = false) throws {
        index = try DescriptorIndex(
            descriptorSets: descriptorSets, serviceNames: serviceNames, hidingUnlistedServices: hidingUnlistedServices)
    }

    /// Both reflection versions, ready to register with a server.
    public var services: [any RPCService] {
        [V1(index: index), V1Alpha(index: index)]
    }

    /// The names of the reflection services themselves, to include in `serviceNames`.
    public static let serviceNames = [Grpc_Reflection_V1_ServerReflection.name, Grpc_Reflection_V1alpha_ServerReflection.name]

    struct V1: Grpc_Reflection_V1_ServerReflection.Handler {
        let index: DescriptorIndex

        func serverReflectionInfo(
            requests: RequestStream<Grpc_Reflection_V1_ServerReflectionRequest>,
            responses: ResponseWriter<Grpc_Reflection_V1_ServerReflectionResponse>, context: ServerContext
        ) async throws {
            for try await request in requests {
                try await responses.write(Self.response(for: request, index: index))
            }
        }
    }

    /// The same answers in v1alpha's messages (identical fields, another package).
    struct V1Alpha: Grpc_Reflection_V1alpha_ServerReflection.Handler {
        let index: DescriptorIndex

        func serverReflectionInfo(
            requests: RequestStream<Grpc_Reflection_V1alpha_ServerReflectionRequest>,
            responses: ResponseWriter<Grpc_Reflection_V1alpha_ServerReflectionResponse>, context: ServerContext
        ) async throws {
            for try await request in requests {
                // The two versions share their wire format: translate through bytes and reuse V1's answers.
                let v1Request = try Grpc_Reflection_V1_ServerReflectionRequest(serializedBytes: try request.serializedBytes() as [UInt8])
                let v1Response = V1.response(for: v1Request, index: index)
                try await responses.write(
                    try Grpc_Reflection_V1alpha_ServerReflectionResponse(serializedBytes: try v1Response.serializedBytes() as [UInt8]))
            }
        }
    }
}

extension ReflectionService.V1 {
    static func response(
        for request: Grpc_Reflection_V1_ServerReflectionRequest, index: DescriptorIndex
    ) -> Grpc_Reflection_V1_ServerReflectionResponse {
        let query: ReflectionQuery? =
            switch request.messageRequest {
            case .fileByFilename(let name): .fileByFilename(name)
            case .fileContainingSymbol(let symbol): .fileContainingSymbol(symbol)
            case .fileContainingExtension(let extensionRequest):
                .fileContainingExtension(extensionRequest.containingType, extensionRequest.extensionNumber)
            case .allExtensionNumbersOfType(let type): .allExtensionNumbersOfType(type)
            case .listServices: .listServices
            case nil: nil
            }
        var response = Grpc_Reflection_V1_ServerReflectionResponse()
        response.validHost = request.host
        response.originalRequest = request
        switch index.answer(query) {
        case .files(let files):
            response.fileDescriptorResponse = .with { $0.fileDescriptorProto = files }
        case .extensionNumbers(let type, let numbers):
            response.allExtensionNumbersResponse = .with {
                $0.baseTypeName = type
                $0.extensionNumber = numbers
            }
        case .services(let names):
            response.listServicesResponse = .with { $0.service = names.map { name in .with { $0.name = name } } }
        case .error(let code, let message):
            response.errorResponse = .with {
                $0.errorCode = Int32(code.rawValue)
                $0.errorMessage = message
            }
        }
        return response
    }
}

enum ReflectionQuery {
    case fileByFilename(String)
    case fileContainingSymbol(String)
    case fileContainingExtension(String, Int32)
    case allExtensionNumbersOfType(String)
    case listServices
}

enum ReflectionAnswer {
    case files([Data])
    case extensionNumbers(String, [Int32])
    case services([String])
    case error(RPCStatusCode, String)
}

/// Every file of the embedded descriptor sets, by name and by the symbols it defines.
struct DescriptorIndex: Sendable {
    private var files: [String: Google_Protobuf_FileDescriptorProto] = [:]
    private var serializedFiles: [String: Data] = [:]
    private var fileBySymbol: [String: String] = [:]
    /// Extension numbers by extended message type, and the file of each extension.
    private var extensions: [String: [Int32: String]] = [:]
    private let serviceNames: [String]

    init(descriptorSets: [String], serviceNames: [String], hidingUnlistedServices: Bool) throws {
        self.serviceNames = serviceNames.sorted()
        let listed = Set(serviceNames)
        for base64 in descriptorSets {
            guard let bytes = Base64.decode(base64) else {
                throw RPCError(.internal, "an embedded descriptor set is not valid base64")
            }
            let set = try Google_Protobuf_FileDescriptorSet(serializedBytes: bytes)
            for var file in set.file where files[file.name] == nil {
                if hidingUnlistedServices {
                    let prefix = file.package.isEmpty ? "" : file.package + "."
                    file.service.removeAll { !listed.contains(prefix + $0.name) }
                }
                files[file.name] = file
                serializedFiles[file.name] = try file.serializedBytes()
                index(file)
            }
        }
    }

    private mutating func index(_ file: Google_Protobuf_FileDescriptorProto) {
        let prefix = file.package.isEmpty ? "" : file.package + "."
        for service in file.service {
            fileBySymbol[prefix + service.name] = file.name
            for method in service.method { fileBySymbol[prefix + service.name + "." + method.name] = file.name }
        }
        for message in file.messageType { index(message, prefix: prefix, file: file.name) }
        for enumeration in file.enumType { fileBySymbol[prefix + enumeration.name] = file.name }
        for field in file.extension { addExtension(field, file: file.name) }
    }

    private mutating func index(_ message: Google_Protobuf_DescriptorProto, prefix: String, file: String) {
        let name = prefix + message.name
        fileBySymbol[name] = file
        for nested in message.nestedType { index(nested, prefix: name + ".", file: file) }
        for enumeration in message.enumType { fileBySymbol[name + "." + enumeration.name] = file }
        for field in message.extension { addExtension(field, file: file) }
    }

    private mutating func addExtension(_ field: Google_Protobuf_FieldDescriptorProto, file: String) {
        let extendee = field.extendee.hasPrefix(".") ? String(field.extendee.dropFirst()) : field.extendee
        extensions[extendee, default: [:]][field.number] = file
    }

    func answer(_ query: ReflectionQuery?) -> ReflectionAnswer {
        switch query {
        case .listServices:
            return .services(serviceNames)
        case .fileByFilename(let name):
            guard files[name] != nil else { return .error(.notFound, "file not found: \(name)") }
            return .files(withDependencies(name))
        case .fileContainingSymbol(let symbol):
            let symbol = symbol.hasPrefix(".") ? String(symbol.dropFirst()) : symbol
            guard let file = fileBySymbol[symbol] else { return .error(.notFound, "symbol not found: \(symbol)") }
            return .files(withDependencies(file))
        case .fileContainingExtension(let type, let number):
            guard let file = extensions[type]?[number] else {
                return .error(.notFound, "extension \(number) of \(type) not found")
            }
            return .files(withDependencies(file))
        case .allExtensionNumbersOfType(let type):
            guard fileBySymbol[type] != nil else { return .error(.notFound, "type not found: \(type)") }
            return .extensionNumbers(type, (extensions[type].map { Array($0.keys) } ?? []).sorted())
        case nil:
            return .error(.invalidArgument, "the request names no query")
        }
    }

    /// The file first, then every file it imports, transitively, each once.
    private func withDependencies(_ name: String) -> [Data] {
        var ordered: [String] = []
        var seen: Set<String> = []
        var pending = [name]
        while let next = pending.first {
            pending.removeFirst()
            guard seen.insert(next).inserted, let file = files[next] else { continue }
            ordered.append(next)
            pending.append(contentsOf: file.dependency)
        }
        return ordered.compactMap { serializedFiles[$0] }
    }
}
