internal import HabitFlowBase64
internal import SwiftProtobuf

/// How a proto marks a method's side effects (`option idempotency_level`).
public enum IdempotencyLevel: Sendable, Hashable {
    case unknown
    /// `NO_SIDE_EFFECTS`: a read.
    case noSideEffects
    /// `IDEMPOTENT`: a write that may be repeated.
    case idempotent

    /// Whether a call may be sent again after `UNAVAILABLE` (see ``CallOptions/idempotent``).
    public var allowsRetry: Bool { self != .unknown }
}

/// One method as its `.proto` declares it: the wire name, the kind of RPC and its idempotency.
public struct MethodSchema: Sendable, Hashable {
    public let descriptor: MethodDescriptor
    public let kind: RPCKind
    public let idempotency: IdempotencyLevel

    public init(descriptor: MethodDescriptor, kind: RPCKind, idempotency: IdempotencyLevel = .unknown) {
        self.descriptor = descriptor
        self.kind = kind
        self.idempotency = idempotency
    }
}

/// One service as its `.proto` declares it, read from a descriptor set (the generated `…DescriptorSet.base64`), so
/// code that handles any method without its message types (a proxy) knows every method's shape.
public struct ServiceSchema: Sendable, Hashable {
    /// The fully qualified name, for example `habitflow.habits.v1.HabitsService`.
    public let name: String
    public let methods: [MethodSchema]

    public init(name: String, methods: [MethodSchema]) {
        self.name = name
        self.methods = methods
    }

    /// The service `name` from base64 `FileDescriptorSet`s; `NOT_FOUND` when none of them declares it.
    public static func load(_ name: String, fromDescriptorSets descriptorSets: [String]) throws -> ServiceSchema {
        for base64 in descriptorSets {
            guard let bytes = Base64.decode(base64) else {
                throw RPCError(.internal, "a descriptor set is not valid base64")
            }
            let set = try Google_Protobuf_FileDescriptorSet(serializedBytes: bytes)
            for file in set.file {
                let prefix = file.package.isEmpty ? "" : file.package + "."
                for service in file.service where prefix + service.name == name {
                    return ServiceSchema(name: name, methods: service.method.map { schema(of: $0, service: name) })
                }
            }
        }
        throw RPCError(.notFound, "no descriptor set declares the service \(name)")
    }

    private static func schema(of method: Google_Protobuf_MethodDescriptorProto, service: String) -> MethodSchema {
        let kind: RPCKind =
            switch (method.clientStreaming, method.serverStreaming) {
            case (false, false): .unary
            case (false, true): .serverStreaming
            case (true, false): .clientStreaming
            case (true, true): .bidirectionalStreaming
            }
        let idempotency: IdempotencyLevel =
            switch method.options.idempotencyLevel {
            case .noSideEffects: .noSideEffects
            case .idempotent: .idempotent
            default: .unknown
            }
        return MethodSchema(
            descriptor: MethodDescriptor(service: service, method: method.name), kind: kind, idempotency: idempotency)
    }
}
