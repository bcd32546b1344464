public import SwiftProtobuf

extension SwiftProtobuf.Message {
    /// This message as the bytes of its wire form only, held as unknown fields, which SwiftProtobuf writes back
    /// verbatim: an answer a service caches this way goes out without being encoded again (encoding nested messages
    /// took about a fifth of the habits service's CPU per cached week view in `perf`).
    ///
    /// - Important: it reads as empty in this process; only a peer decoding the bytes sees its fields.
    public func wireForm() throws -> Self {
        let bytes: [UInt8] = try serializedBytes()
        var wireForm = Self()
        // A message without fields keeps every field it reads as an unknown one.
        wireForm.unknownFields = try Google_Protobuf_Empty(serializedBytes: bytes).unknownFields
        return wireForm
    }
}
