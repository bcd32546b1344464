import SwiftProtobufPluginLibrary

/// Emits the server and client API of one proto service into its namespace enum:
///
///     enum <Prefix><Service> {
///         static let name
///         enum Method { static let <rpc>: MethodDescriptor …; static let all }
///         static let jsonTranscoders (by rpc name: what a proxy that forwards raw bytes needs for JSON clients)
///         protocol Handler: RPCService { one typed requirement per rpc }
///         struct Client { one typed method per rpc (plus `…WithMetadata` for single responses) }
///     }
///     extension <Prefix><Service>.Handler { serviceName, methods (routing to the typed requirements) }
struct ServiceEmitter {
    let service: ServiceDescriptor
    let namer: SwiftProtobufNamer
    let visibility: GeneratorOptions.Visibility

    /// Swift names of the rpcs, in proto order.
    private let swiftNames: [String]

    init(service: ServiceDescriptor, namer: SwiftProtobufNamer, visibility: GeneratorOptions.Visibility) {
        self.service = service
        self.namer = namer
        self.visibility = visibility
        self.swiftNames = service.methods.map { Self.swiftName(forRPC: $0.name) }
    }

    /// The namespace: the package's Swift type prefix plus the service name, like protoc-gen-swift's message names
    /// (`grpc.testing.TestService` → `Grpc_Testing_TestService`).
    var namespace: String { namer.typePrefix(forFile: service.file) + service.name }

    private var access: String { visibility.keyword }

    func emit(into printer: inout CodePrinter) {
        printer.print(service.protoSourceComments())
        printer.print("\(access) enum \(namespace) {\n")
        printer.withIndentation { printer in
            printer.print("\(access) static let name = \(quoted(service.fullName))\n", "\n")
            emitMethodDescriptors(into: &printer)
            printer.print("\n")
            emitJSONTranscoders(into: &printer)
            printer.print("\n")
            emitHandlerProtocol(into: &printer)
            printer.print("\n")
            emitClient(into: &printer)
        }
        printer.print("}\n", "\n")
        emitHandlerRouting(into: &printer)
    }

    private func emitMethodDescriptors(into printer: inout CodePrinter) {
        printer.print("\(access) enum Method {\n")
        printer.withIndentation { printer in
            for (method, swiftName) in zip(service.methods, swiftNames) {
                printer.print(
                    "\(access) static let \(swiftName) = MethodDescriptor(service: \(quoted(service.fullName)),"
                        + " method: \(quoted(method.name)))\n")
            }
            printer.print("\(access) static let all: [MethodDescriptor] = [\(swiftNames.joined(separator: ", "))]\n")
        }
        printer.print("}\n")
    }

    /// The message types of every rpc, for a server that forwards the service without its typed handler (the
    /// gateway) and must still read and write JSON for web clients.
    private func emitJSONTranscoders(into printer: inout CodePrinter) {
        printer.print(
            "/// The JSON transcoder of each rpc, by rpc name (for `ForwardingService`, which knows no message types).\n",
            "\(access) static let jsonTranscoders: [String: any MessageJSONTranscoding] = [\n")
        printer.withIndentation { printer in
            for method in service.methods {
                let request = namer.fullName(message: method.inputType)
                let response = namer.fullName(message: method.outputType)
                printer.print("\(quoted(method.name)): JSONTranscoder(\(request).self, \(response).self),\n")
            }
        }
        printer.print("]\n")
    }

    private func emitHandlerProtocol(into printer: inout CodePrinter) {
        printer.print(
            "/// Implement this to serve \(service.fullName).\n",
            "\(access) protocol Handler: RPCService {\n")
        printer.withIndentation { printer in
            for (index, (method, swiftName)) in zip(service.methods, swiftNames).enumerated() {
                if index > 0 { printer.print("\n") }
                printer.print(method.protoSourceComments())
                printer.print("func \(swiftName)(\(handlerSignature(of: method))\n")
            }
        }
        printer.print("}\n")
    }

    /// The parameter list and result of the typed handler requirement, after `func name(`.
    private func handlerSignature(of method: MethodDescriptor) -> String {
        let request = namer.fullName(message: method.inputType)
        let response = namer.fullName(message: method.outputType)
        switch (method.clientStreaming, method.serverStreaming) {
        case (false, false):
            return "request: \(request), context: ServerContext) async throws -> \(response)"
        case (false, true):
            return "request: \(request), responses: ResponseWriter<\(response)>, context: ServerContext) async throws"
        case (true, false):
            return "requests: RequestStream<\(request)>, context: ServerContext) async throws -> \(response)"
        case (true, true):
            return "requests: RequestStream<\(request)>, responses: ResponseWriter<\(response)>,"
                + " context: ServerContext) async throws"
        }
    }

    /// The typed client: single responses come back as the message (`…WithMetadata` adds the response metadata and
    /// trailers); streamed responses as a `ResponseStream`, which carries both; streamed requests are any
    /// `AsyncSequence` of the request type.
    private func emitClient(into printer: inout CodePrinter) {
        printer.print(
            "/// Calls \(service.fullName) through a transport (an `RPCChannel`).\n",
            "///\n",
            "/// Methods with one response return it; their `…WithMetadata` twins also return the response metadata and\n",
            "/// trailers. Streamed responses come as a `ResponseStream` (an `AsyncSequence` that has both). Streamed\n",
            "/// requests are any `AsyncSequence` of the request type. Errors are `RPCError`s.\n",
            "\(access) struct Client: Sendable {\n")
        printer.withIndentation { printer in
            printer.print(
                "\(access) let transport: any RPCClientTransport\n", "\n",
                "\(access) init(transport: any RPCClientTransport) {\n",
                "    self.transport = transport\n",
                "}\n")
            for (method, swiftName) in zip(service.methods, swiftNames) {
                printer.print("\n")
                emitClientMethods(for: method, swiftName: swiftName, into: &printer)
            }
        }
        printer.print("}\n")
    }

    private func emitClientMethods(for method: MethodDescriptor, swiftName: String, into printer: inout CodePrinter) {
        let request = namer.fullName(message: method.inputType)
        let response = namer.fullName(message: method.outputType)
        let descriptor = "\(namespace).Method.\(swiftName)"
        let withMetadata = swiftName.filter { $0 != "`" } + "WithMetadata"
        let options = "options: CallOptions = CallOptions()"
        let requests = "<Requests: AsyncSequence & Sendable>(requests: Requests, \(options))"
        let whereClause = "where Requests.Element == \(request)"
        // Methods the proto marks as safe to repeat are retried by default (CallOptions.idempotent overrides).
        let idempotent =
            [.idempotent, .noSideEffects].contains(method.options.idempotencyLevel) ? ", idempotentByDefault: true" : ""
        printer.print(method.protoSourceComments())
        switch (method.clientStreaming, method.serverStreaming) {
        case (false, false):
            printer.print(
                "\(access) func \(swiftName)(_ request: \(request), \(options)) async throws -> \(response) {\n",
                "    try await \(withMetadata)(request, options: options).message\n", "}\n", "\n",
                "\(access) func \(withMetadata)(_ request: \(request), \(options)) async throws"
                    + " -> UnaryResponse<\(response)> {\n",
                "    try await transport.unary(\(descriptor), request, options: options\(idempotent))\n", "}\n")
        case (false, true):
            printer.print(
                "\(access) func \(swiftName)(_ request: \(request), \(options)) async throws"
                    + " -> ResponseStream<\(response)> {\n",
                "    try await transport.serverStreaming(\(descriptor), request, options: options\(idempotent))\n", "}\n")
        case (true, false):
            printer.print(
                "\(access) func \(swiftName)\(requests) async throws -> \(response) \(whereClause) {\n",
                "    try await \(withMetadata)(requests: requests, options: options).message\n", "}\n", "\n",
                "\(access) func \(withMetadata)\(requests) async throws -> UnaryResponse<\(response)>"
                    + " \(whereClause) {\n",
                "    try await transport.clientStreaming(\(descriptor), requests: requests, options: options)\n", "}\n")
        case (true, true):
            printer.print(
                "\(access) func \(swiftName)\(requests) async throws -> ResponseStream<\(response)>"
                    + " \(whereClause) {\n",
                "    try await transport.bidirectionalStreaming(\(descriptor), requests: requests, options: options)\n",
                "}\n")
        }
    }

    private func emitHandlerRouting(into printer: inout CodePrinter) {
        printer.print("extension \(namespace).Handler {\n")
        printer.withIndentation { printer in
            printer.print("\(access) var serviceName: String { \(namespace).name }\n", "\n")
            printer.print("\(access) var methods: [ServerMethod] {\n")
            printer.withIndentation { printer in
                printer.print("[\n")
                printer.withIndentation { printer in
                    for (method, swiftName) in zip(service.methods, swiftNames) {
                        printer.print(routeExpression(for: method, swiftName: swiftName) + ",\n")
                    }
                }
                printer.print("]\n")
            }
            printer.print("}\n")
        }
        printer.print("}\n")
    }

    /// One `ServerMethod` of the `methods` list: the kind's factory, the descriptor and a closure that forwards to
    /// the typed requirement (the factory's generic parameters are inferred from it).
    private func routeExpression(for method: MethodDescriptor, swiftName: String) -> String {
        let descriptor = "\(namespace).Method.\(swiftName)"
        switch (method.clientStreaming, method.serverStreaming) {
        case (false, false):
            return ".unary(\(descriptor)) { try await self.\(swiftName)(request: $0, context: $1) }"
        case (false, true):
            return ".serverStreaming(\(descriptor)) {"
                + " try await self.\(swiftName)(request: $0, responses: $1, context: $2) }"
        case (true, false):
            return ".clientStreaming(\(descriptor)) { try await self.\(swiftName)(requests: $0, context: $1) }"
        case (true, true):
            return ".bidirectionalStreaming(\(descriptor)) {"
                + " try await self.\(swiftName)(requests: $0, responses: $1, context: $2) }"
        }
    }

    /// `EmptyCall` → `emptyCall`; Swift keywords are backticked (`Import` → `` `import` ``), and names the
    /// generated code itself uses inside `Method` and `Handler` get a trailing underscore, as protoc-gen-swift does.
    static func swiftName(forRPC rpcName: String) -> String {
        let name = NamingUtils.toLowerCamelCase(rpcName)
        if reservedMemberNames.contains(name) { return name + "_" }
        if swiftKeywords.contains(name) { return "`\(name)`" }
        return name
    }

    /// `Method.all`, the `RPCService` requirements the `Handler` extension provides, and `Client.transport`.
    private static let reservedMemberNames: Set<String> = ["all", "serviceName", "methods", "transport"]

    private static let swiftKeywords: Set<String> = swiftKeywordsUsedInDeclarations
        .union(swiftKeywordsUsedInStatements)
        .union(swiftKeywordsUsedInExpressionsAndTypes)
        .union(swiftKeywordsReservedInParticularContexts)
}

/// A Swift string literal of a proto name (identifiers and dots: nothing to escape).
private func quoted(_ protoName: String) -> String { "\"\(protoName)\"" }
