internal import HabitFlowGRPCProtos
internal import HabitFlowHTTP2
internal import HabitFlowRPC
internal import HabitFlowRPCWeb
internal import Logging
internal import NIOCore
internal import SwiftProtobuf

/// A web call's protocol state, kept on its ``ServerCall``: how its request body becomes messages and how its
/// response is written (``WebProtocol``). The same for HTTP/2 and HTTP/1.1; only the writing of the parts differs.
///
/// A class, so a native call's ``ServerCall`` grows by one pointer, not by the codec's size.
final class WebCallCodec {
    var decoder: WebRequestDecoder
    var encoder: WebResponseEncoder

    init(decoder: WebRequestDecoder, encoder: WebResponseEncoder) {
        self.decoder = decoder
        self.encoder = encoder
    }
}

/// What the server makes of a request head when web protocols are on, before any call exists. Shared by the
/// HTTP/2 and the HTTP/1.1 connection, so both accept and refuse exactly the same requests.
enum WebRequestDecision {
    /// Not a web request: the connection answers as it does without web protocols.
    case notWeb
    /// A CORS preflight (`OPTIONS`): answer 204 with these headers (none for an origin not allowed).
    case preflight(headers: [(name: String, value: String)])
    /// Start the call.
    case call(ServerMethod, WebCallCodec, metadata: Metadata, timeout: Duration?)
    /// Answer with this error, written by the codec.
    case reject(WebCallCodec, RPCError)

    static func decide(
        _ head: ServerRequestHead, router: RPCRouter, web: WebConfiguration, maxMessageSize: Int,
        allocator: ByteBufferAllocator
    ) -> WebRequestDecision {
        let origin = head.metadata["origin"]
        if head.method == "OPTIONS" {
            return .preflight(headers: web.cors?.preflightHeaders(origin: origin) ?? [])
        }
        guard let contentType = head.contentType, let webProtocol = WebProtocol(contentType: contentType) else {
            return .notWeb
        }
        let path = head.path ?? ""
        let method = router.methods[path]
        let transcoder = method?.jsonTranscoder
        let codec = WebCallCodec(
            decoder: WebRequestDecoder(protocol: webProtocol, maxMessageSize: maxMessageSize, transcoder: transcoder),
            encoder: WebResponseEncoder(
                protocol: webProtocol, transcoder: transcoder,
                extraHeaders: web.cors?.responseHeaders(origin: origin) ?? [], allocator: allocator))
        func reject(_ code: RPCStatusCode, _ message: String) -> WebRequestDecision {
            .reject(codec, RPCError(code, message))
        }
        guard head.method == "POST" else {
            return reject(.unimplemented, "web calls use POST, got \(head.method ?? "none")")
        }
        guard let method else { return reject(.unimplemented, "Method not found: \(path)") }
        var timeout: Duration?
        switch webProtocol {
        case .grpcWeb:
            if let value = head.timeout {
                guard let parsed = GRPCTimeout.parse(value) else {
                    return reject(.internal, "malformed grpc-timeout \"\(value)\"")
                }
                timeout = parsed
            }
        case .connectStreaming:
            return reject(.unimplemented, "Connect streaming is not supported here; use gRPC-Web for \(path)")
        case .connectUnary(let json):
            guard method.kind == .unary else {
                return reject(
                    .unimplemented, "\(path) is a streaming method: Connect calls only unary ones; use gRPC-Web")
            }
            if json && transcoder == nil { return reject(.unimplemented, "\(path) does not accept JSON") }
            if let version = head.metadata["connect-protocol-version"], version != ConnectProtocol.version {
                return reject(.invalidArgument, "connect-protocol-version \"\(version)\" is not supported (only 1)")
            }
            if let value = head.metadata["connect-timeout-ms"] {
                guard let parsed = ConnectProtocol.parseTimeout(value) else {
                    return reject(.invalidArgument, "malformed connect-timeout-ms \"\(value)\"")
                }
                timeout = parsed
            }
        }
        // The protocols' own headers and what browsers add to every request (cookies included) are not the
        // application's metadata, and a proxy must not pass them on.
        var metadata = head.metadata
        metadata.removeAll(where: isProtocolOrBrowserField)
        return .call(method, codec, metadata: metadata, timeout: timeout)
    }

    /// A switch over short literals rather than a `Set`: hashing every key was a visible share of a web call.
    private static func isProtocolOrBrowserField(_ key: String) -> Bool {
        switch key {
        case "x-grpc-web", "x-user-agent", "origin", "referer", "cookie", "accept", "accept-encoding", "accept-language",
            "cache-control", "pragma", "priority", "dnt":
            true
        default:
            key.hasPrefix("connect-") || key.hasPrefix("sec-")
        }
    }
}

/// A connection that serves web calls (HTTP/2 and HTTP/1.1): how it fails a call and puts response parts on the wire.
protocol WebCallConnection: ServerCallConnection {
    /// Ends `call` from the runtime's side with `error` (status out, handler cancelled).
    func failCall(_ call: ServerCall<Self>, _ error: RPCError)
    /// Writes `parts` of `call`'s response in the connection's HTTP version.
    func submitWebParts(_ parts: [WebResponsePart], of call: ServerCall<Self>)
}

extension WebCallConnection {
    /// Runs `produce` on the call's response encoder and writes what it made; false (the call failed) when it threw.
    func writeWebParts(
        _ call: ServerCall<Self>, _ produce: (inout WebResponseEncoder) throws(RPCError) -> [WebResponsePart]
    ) -> Bool {
        let parts: [WebResponsePart]
        do {
            parts = try produce(&call.web!.encoder)
        } catch {
            failCall(call, error)
            return false
        }
        if call.web!.encoder.headSent { call.headersSent = true }
        submitWebParts(parts, of: call)
        return true
    }

    /// Request body bytes of a web call: its completed messages go to the handler, a bad body fails the call.
    func receiveWebBody(_ bytes: ByteBuffer, of call: ServerCall<Self>) {
        do {
            for message in try call.web!.decoder.append(bytes) { _ = call.transport.deliver(message) }
        } catch {
            failCall(call, error)
        }
    }

    /// The end of a web call's request body: the last (Connect: only) message, then the end of the requests.
    func endWebBody(of call: ServerCall<Self>) {
        do {
            for message in try call.web!.decoder.finish() { _ = call.transport.deliver(message) }
        } catch {
            return failCall(call, error)
        }
        call.transport.finishRequests()
    }

    /// Writes the status of a web call (marking it sent).
    func writeWebStatus(_ call: ServerCall<Self>, _ status: CallStatus) {
        call.statusSent = true
        submitWebParts(
            call.web!.encoder.status(
                status.web(trailers: call.context.trailers), initialMetadata: call.context.initialMetadata),
            of: call)
    }
}

extension WebResponseEncoder {
    /// The whole response of a web request refused before any call existed.
    mutating func rejection(_ error: RPCError) -> [WebResponsePart] {
        status(CallStatus(error).web(trailers: Metadata()), initialMetadata: Metadata())
    }
}

/// How a call ended: the status a connection writes, whatever the protocol.
struct CallStatus {
    var code: RPCStatusCode
    var message: String
    var details: [Google_Protobuf_Any]
    var encodedDetails: [UInt8]?
    var trailers: Metadata

    static let ok = CallStatus(code: .ok, message: "")

    init(
        code: RPCStatusCode, message: String, details: [Google_Protobuf_Any] = [], encodedDetails: [UInt8]? = nil,
        trailers: Metadata = Metadata()
    ) {
        self.code = code
        self.message = message
        self.details = details
        self.encodedDetails = encodedDetails
        self.trailers = trailers
    }

    init(_ error: RPCError) {
        self.init(
            code: error.code, message: error.message, details: error.details,
            encodedDetails: error.receivedStatusDetails, trailers: error.trailers)
    }

    /// The status of a call whose handler returned or threw. Errors other than ``RPCError`` may carry internals
    /// (SQL, paths): they are logged, and the client is told only that the handler failed.
    init(ending outcome: Result<Void, any Error>, method: MethodDescriptor, logger: @autoclosure () -> Logger) {
        switch outcome {
        case .success: self = .ok
        case .failure(let error as RPCError): self.init(error)
        case .failure(is CancellationError): self.init(code: .cancelled, message: "the call was cancelled")
        case .failure(let error):
            logger().error("handler failed", metadata: ["method": "\(method)", "error": "\(String(reflecting: error))"])
            self.init(code: .unknown, message: "the handler failed with an unexpected error")
        }
    }

    /// This status for a web response, `context`'s trailers first.
    func web(trailers contextTrailers: Metadata) -> WebCallStatus {
        var all = contextTrailers
        all.add(contentsOf: trailers)
        let fields = StatusTrailers.fields(
            code, message: message, details: details, encodedDetails: encodedDetails, trailers: all)
        return WebCallStatus(
            code: code, message: message, details: details, encodedDetails: encodedDetails, trailers: all,
            grpcTrailerFields: fields.map { ($0.name, $0.value) })
    }
}

/// Starts a call's handler, behind the interceptors, and reports its end to the connection on its event loop.
///
/// `Task.immediate` runs the handler right here, on the event loop, until it first suspends: a call that never
/// waits (most unary calls once their request is in) completes within this read, with no hop and no wake-up of
/// another thread. After a suspension it resumes on the preferred executor (the event loop).
func startCallHandler<Connection: ServerCallConnection>(
    on connection: NIOLoopBound<Connection>, streamID: Int32, context: ServerContext,
    transport: CallTransport<Connection>,
    run: @escaping @Sendable (ServerContext, any ServerCallTransport) async throws -> Void,
    interceptors: [any ServerInterceptor], executor: (any TaskExecutor)?
) -> Task<Void, Never> {
    Task.immediate(executorPreference: executor) {
        let outcome: Result<Void, any Error>
        do {
            if interceptors.isEmpty {
                try await run(context, transport)
            } else {
                try await interceptors.run(context: context) { try await run(context, transport) }
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        if connection.eventLoop.inEventLoop {
            connection.value.handlerFinished(streamID: streamID, outcome: outcome)
        } else {
            connection.eventLoop.execute { connection.value.handlerFinished(streamID: streamID, outcome: outcome) }
        }
    }
}
