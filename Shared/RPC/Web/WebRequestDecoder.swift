public import HabitFlowRPC
public import NIOCore

/// Turns a web request body into request messages, as it arrives: gRPC-Web's length-prefixed messages (after
/// base64 for `-text`), or Connect unary's one bare message (converted from JSON when the call is JSON).
public struct WebRequestDecoder: Sendable {
    private let webProtocol: WebProtocol
    private let maxMessageSize: Int
    private let transcoder: (any MessageJSONTranscoding)?
    private var deframer: MessageDeframer
    private var text: GRPCWebTextDecoder?
    /// Connect unary: the body so far.
    private var body: ByteBuffer?

    /// - Parameter transcoder: the method's, required for JSON calls.
    public init(protocol webProtocol: WebProtocol, maxMessageSize: Int, transcoder: (any MessageJSONTranscoding)?) {
        self.webProtocol = webProtocol
        self.maxMessageSize = maxMessageSize
        self.transcoder = transcoder
        self.deframer = MessageDeframer(maxMessageSize: maxMessageSize)
        if webProtocol == .grpcWeb(text: true) { text = GRPCWebTextDecoder() }
    }

    /// The messages completed by `bytes`.
    public mutating func append(_ bytes: ByteBuffer) throws(RPCError) -> [ReceivedMessage] {
        switch webProtocol {
        case .grpcWeb(let isText):
            if isText {
                guard let decoded = text?.append(bytes) else {
                    throw RPCError(.internal, "the grpc-web-text request body is not base64")
                }
                deframer.append(ByteBuffer(bytes: decoded))
            } else {
                deframer.append(bytes)
            }
            return try deframedMessages()
        case .connectUnary, .connectStreaming:
            let size = (body?.readableBytes ?? 0) + bytes.readableBytes
            guard size <= maxMessageSize else {
                throw RPCError(
                    .resourceExhausted, "received message larger than max (\(size) vs. \(maxMessageSize) bytes)")
            }
            if body == nil {
                body = bytes
            } else {
                var bytes = bytes
                body!.writeBuffer(&bytes)
            }
            return []
        }
    }

    /// The body ended: the last message (Connect's only one), or an error for a body cut short.
    public mutating func finish() throws(RPCError) -> [ReceivedMessage] {
        switch webProtocol {
        case .grpcWeb:
            guard deframer.isAtMessageBoundary, text?.isAtBoundary ?? true else {
                throw RPCError(.internal, "the request stream ended inside a message (truncated message)")
            }
            return []
        case .connectUnary(let json):
            // An empty body is the empty message, in JSON too (browsers' fetch sends none for `{}` sometimes).
            let received = body ?? ByteBuffer()
            guard json else { return [ReceivedMessage(payload: received, wasCompressed: false)] }
            guard let transcoder else {
                throw RPCError(.unimplemented, "this method does not accept JSON; send application/proto")
            }
            let payload = received.readableBytes == 0 ? received : try transcoder.requestFromJSON(received)
            return [ReceivedMessage(payload: payload, wasCompressed: false)]
        case .connectStreaming:
            return []
        }
    }

    private mutating func deframedMessages() throws(RPCError) -> [ReceivedMessage] {
        var messages: [ReceivedMessage] = []
        while true {
            let next: FramedMessage?
            do {
                next = try deframer.next()
            } catch {
                switch error {
                case .messageTooLarge(let length, let limit):
                    throw RPCError(.resourceExhausted, "received message larger than max (\(length) vs. \(limit) bytes)")
                case .invalidFlag(let flag):
                    throw RPCError(.internal, "invalid compressed-flag byte \(flag) in message prefix")
                }
            }
            guard let framed = next else { break }
            // gRPC-Web requests here carry no grpc-encoding, so a compressed message cannot be read.
            guard !framed.compressed else {
                throw RPCError(.internal, "received a compressed message without a grpc-encoding")
            }
            messages.append(ReceivedMessage(payload: framed.payload, wasCompressed: false))
        }
        return messages
    }
}
