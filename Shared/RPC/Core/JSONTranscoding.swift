public import NIOCore
public import SwiftProtobuf

/// Converts the messages of one method between protobuf binary (what handlers and backends speak) and proto3 JSON
/// (what a Connect client may send), with swift-protobuf's own JSON mapping.
///
/// A transport that serves JSON converts at its edge: the request before the handler sees it, the response after
/// the handler wrote it. So handlers, interceptors and forwarding stay binary-only.
public protocol MessageJSONTranscoding: Sendable {
    /// A JSON request as a binary protobuf message; `INVALID_ARGUMENT` when it is not valid JSON for the type.
    func requestFromJSON(_ json: ByteBuffer) throws(RPCError) -> ByteBuffer
    /// A binary response message as JSON; `INTERNAL` when it does not parse (a server bug).
    func responseToJSON(_ binary: ByteBuffer) throws(RPCError) -> ByteBuffer
}

/// The ``MessageJSONTranscoding`` of a method with these request and response types: the one generic helper every
/// typed method factory and the generated `jsonTranscoders` tables use.
public struct JSONTranscoder<Request: Message, Response: Message>: MessageJSONTranscoding {
    public init(_ request: Request.Type, _ response: Response.Type) {}

    /// Unknown fields are ignored, as Connect's own servers do, so an older server accepts a newer web client.
    private static var decodingOptions: JSONDecodingOptions {
        var options = JSONDecodingOptions()
        options.ignoreUnknownFields = true
        return options
    }

    public func requestFromJSON(_ json: ByteBuffer) throws(RPCError) -> ByteBuffer {
        let request: Request
        do {
            request = try Request(jsonUTF8Bytes: ProtobufBuffer(json), options: Self.decodingOptions)
        } catch {
            throw RPCError(.invalidArgument, "could not parse the JSON \(Request.protoMessageName) message: \(error)")
        }
        do {
            return try encode(request)
        } catch {
            throw RPCError(.internal, "could not serialize the request")
        }
    }

    public func responseToJSON(_ binary: ByteBuffer) throws(RPCError) -> ByteBuffer {
        do {
            let response = try Response(serializedBytes: ProtobufBuffer(binary))
            let json: ProtobufBuffer = try response.jsonUTF8Bytes()
            return json.buffer
        } catch {
            throw RPCError(.internal, "could not write the \(Response.protoMessageName) response as JSON")
        }
    }
}
