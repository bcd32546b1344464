public import SwiftProtobuf

/// The response of a call with one response message, with the metadata around it.
public struct UnaryResponse<Message: SwiftProtobuf.Message>: Sendable {
    public var message: Message
    /// The metadata of the response headers.
    public var initialMetadata: Metadata
    /// The trailing metadata sent with the status.
    public var trailers: Metadata
}

/// The response messages of a server-streaming or bidirectional call, as an async sequence.
///
/// The call ends when the sequence ends (``trailers`` are then available), throws (an ``RPCError``), or when the
/// stream and its iterators are dropped (the call is cancelled: RST_STREAM).
public struct ResponseStream<Message: SwiftProtobuf.Message>: AsyncSequence, Sendable {
    public typealias Element = Message
    let call: StreamingCall

    /// The metadata of the response headers (waits for them).
    public func initialMetadata() async throws -> Metadata {
        try await call.stream.initialMetadata()
    }

    /// The trailing metadata, once the sequence ended.
    public var trailers: Metadata { call.stream.trailers }

    /// Ends the call now; the sequence throws `CANCELLED`.
    public func cancel() { call.stream.cancel() }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let call: StreamingCall

        public mutating func next() async throws -> Message? {
            guard let payload = try await call.stream.nextMessage() else { return nil }
            return try HabitFlowRPC.decode(payload)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(call: call)
    }
}

/// Keeps a streaming call alive while its response stream is referenced; cancels it (and the request producer)
/// when the last reference goes.
final class StreamingCall: Sendable {
    let stream: any ClientCallStream
    let requestProducer: Task<Void, Never>?

    init(stream: any ClientCallStream, requestProducer: Task<Void, Never>?) {
        self.stream = stream
        self.requestProducer = requestProducer
    }

    deinit {
        requestProducer?.cancel()
        stream.cancel()
    }
}

// MARK: - Typed calls (what generated clients call)

extension RPCClientTransport {
    /// One request, one response.
    public func unary<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ method: MethodDescriptor, _ request: Request, options: CallOptions, idempotentByDefault: Bool = false,
        responseType: Response.Type = Response.self
    ) async throws -> UnaryResponse<Response> {
        let stream = try await startCall(
            method, options: options.defaultingIdempotent(idempotentByDefault), singleRequest: try encode(request))
        return try await readSingleResponse(stream)
    }

    /// One request, a stream of responses.
    public func serverStreaming<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ method: MethodDescriptor, _ request: Request, options: CallOptions, idempotentByDefault: Bool = false,
        responseType: Response.Type = Response.self
    ) async throws -> ResponseStream<Response> {
        let stream = try await startCall(
            method, options: options.defaultingIdempotent(idempotentByDefault), singleRequest: try encode(request))
        return ResponseStream(call: StreamingCall(stream: stream, requestProducer: nil))
    }

    /// A stream of requests, one response. The requests are sent while the response is awaited; a server may
    /// answer before reading them all.
    public func clientStreaming<
        Requests: AsyncSequence & Sendable, Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message
    >(
        _ method: MethodDescriptor, requests: Requests, options: CallOptions,
        responseType: Response.Type = Response.self
    ) async throws -> UnaryResponse<Response> where Requests.Element == Request {
        let stream = try await startCall(method, options: options, singleRequest: nil)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await sendRequests(requests, on: stream) }
            do {
                let response: UnaryResponse<Response> = try await readSingleResponse(stream)
                group.cancelAll()
                return response
            } catch {
                group.cancelAll()
                // A failing request sequence is the cause; report it rather than the CANCELLED it led to.
                while try await group.next() != nil {}
                throw error
            }
        }
    }

    /// Streams both ways. Requests are sent by a task of their own while the caller reads the responses.
    public func bidirectionalStreaming<
        Requests: AsyncSequence & Sendable, Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message
    >(
        _ method: MethodDescriptor, requests: Requests, options: CallOptions,
        responseType: Response.Type = Response.self
    ) async throws -> ResponseStream<Response> where Requests.Element == Request {
        let stream = try await startCall(method, options: options, singleRequest: nil)
        let producer = Task<Void, Never> { _ = try? await sendRequests(requests, on: stream) }
        return ResponseStream(call: StreamingCall(stream: stream, requestProducer: producer))
    }
}

extension CallOptions {
    func defaultingIdempotent(_ idempotent: Bool) -> CallOptions {
        guard self.idempotent == nil else { return self }
        var options = self
        options.idempotent = idempotent
        return options
    }
}

/// Sends every request, then half-closes. A failing sequence cancels the call and rethrows; a failing send means
/// the call already ended, which the response side reports.
private func sendRequests<Requests: AsyncSequence & Sendable, Request: SwiftProtobuf.Message>(
    _ requests: Requests, on stream: any ClientCallStream
) async throws where Requests.Element == Request {
    do {
        for try await request in requests {
            do {
                try await stream.send(try encode(request))
            } catch {
                return
            }
        }
    } catch {
        stream.cancel()
        throw error
    }
    await stream.finishRequests()
}

private func readSingleResponse<Response: SwiftProtobuf.Message>(
    _ stream: any ClientCallStream
) async throws -> UnaryResponse<Response> {
    let initialMetadata = try await stream.initialMetadata()
    guard let payload = try await stream.nextMessage() else {
        throw RPCError(.unimplemented, "the server sent no response message for a single-response call")
    }
    guard try await stream.nextMessage() == nil else {
        stream.cancel()
        throw RPCError(.unimplemented, "the server sent more than one response message for a single-response call")
    }
    return UnaryResponse(message: try decode(payload), initialMetadata: initialMetadata, trailers: stream.trailers)
}
