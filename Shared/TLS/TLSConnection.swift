internal import COpenSSL
internal import NIOCore

/// One connection's OpenSSL `SSL`, fed ciphertext from ByteBuffers and drained into ByteBuffers.
///
/// The SSL object talks to a custom memory BIO whose read side is the ciphertext handed to ``receive(_:)`` and whose
/// write side appends to ``takeOutput()``'s buffer. Both are Swift ByteBuffers that exist only while they hold bytes,
/// so an idle connection keeps no buffer of its own (and `SSL_MODE_RELEASE_BUFFERS` frees OpenSSL's record buffers).
///
/// - Important: Not thread-safe: one event loop drives a connection, which is why it is not `Sendable`.
final class TLSConnection {
    enum HandshakeResult {
        case complete
        case wantsInput
        case failed(TLSError)
    }

    enum ReadResult {
        case bytes
        case wantsInput
        case closeNotifyReceived
        case failed(TLSError)
    }

    /// Kept so the SSL_CTX, the BIO method and the callbacks' `arg` outlive this connection.
    let context: TLSContext
    private let ssl: OpaquePointer
    private let bio: OpaquePointer
    private let allocator: ByteBufferAllocator
    /// Ciphertext received and not yet read by OpenSSL; nil when empty.
    private var inbound: ByteBuffer?
    /// Ciphertext produced by OpenSSL and not yet taken; nil when empty.
    private var outbound: ByteBuffer?
    /// The peer closed its side of the TCP connection: the BIO reports end of file once `inbound` is empty.
    private(set) var inputClosed = false
    private(set) var isHandshakeComplete = false
    /// Set by the server's ALPN callbacks when they refused the client's protocols.
    var refusedForApplicationProtocol = false

    init(context: TLSContext, serverName: String?, allocator: ByteBufferAllocator) throws(TLSError) {
        let ssl = try context.makeSSL(serverName: serverName)
        guard let bio = BIO_new(context.bioMethod) else {
            SSL_free(ssl)
            throw TLSError.openSSL(.invalidConfiguration, "BIO_new")
        }
        self.context = context
        self.ssl = ssl
        self.bio = bio
        self.allocator = allocator
        // Unretained: the SSL (and with it the BIO) is freed in deinit, so neither can call back into a dead object.
        let unretainedSelf = Unmanaged.passUnretained(self).toOpaque()
        BIO_set_data(bio, unretainedSelf)
        _ = SSL_set_ex_data(ssl, 0, unretainedSelf)
        SSL_set_bio(ssl, bio, bio)  // the SSL takes our one reference to the BIO and frees it
    }

    deinit {
        BIO_set_data(bio, nil)
        _ = SSL_set_ex_data(ssl, 0, nil)
        SSL_free(ssl)
    }

    /// The connection an SSL object belongs to, for OpenSSL callbacks.
    static func from(_ ssl: OpaquePointer?) -> TLSConnection? {
        guard let ssl, let data = SSL_get_ex_data(ssl, 0) else { return nil }
        return Unmanaged<TLSConnection>.fromOpaque(data).takeUnretainedValue()
    }

    // MARK: Ciphertext in and out

    /// Queues ciphertext read from the peer.
    func receive(_ bytes: ByteBuffer) {
        guard var buffered = inbound else {
            inbound = bytes
            return
        }
        inbound = nil  // keep the buffer uniquely referenced so appending does not copy it
        buffered.writeImmutableBuffer(bytes)
        inbound = buffered
    }

    /// Records that the peer will send nothing more (TCP FIN).
    func markInputClosed() {
        inputClosed = true
    }

    /// Takes the ciphertext OpenSSL produced so far, if any.
    func takeOutput() -> ByteBuffer? {
        defer { outbound = nil }
        return outbound
    }

    var pendingOutputBytes: Int { outbound?.readableBytes ?? 0 }

    fileprivate var pendingInputBytes: Int { inbound?.readableBytes ?? 0 }

    fileprivate func consumeInput(into destination: UnsafeMutableRawBufferPointer) -> Int {
        guard var buffered = inbound else { return 0 }
        inbound = nil
        let count = min(buffered.readableBytes, destination.count)
        buffered.readWithUnsafeReadableBytes { source in
            destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(count)))
            return count
        }
        if buffered.readableBytes > 0 { inbound = buffered }
        return count
    }

    fileprivate func appendOutput(_ bytes: UnsafeRawBufferPointer) {
        if outbound == nil { outbound = allocator.buffer(capacity: bytes.count) }
        outbound!.writeBytes(bytes)
    }

    // MARK: TLS operations

    /// Advances the handshake with the ciphertext received so far.
    func handshake() -> HandshakeResult {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            isHandshakeComplete = true
            return .complete
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantsInput
        default: return .failed(failure(during: "the TLS handshake"))
        }
    }

    /// Decrypts one record's worth of application data (at most) and appends it to `buffer`.
    func read(into buffer: inout ByteBuffer) -> ReadResult {
        ERR_clear_error()
        var status: Int32 = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 16_384) { destination in
            var count = 0
            status = SSL_read_ex(ssl, destination.baseAddress, destination.count, &count)
            return status == 1 ? count : 0
        }
        if status == 1 { return .bytes }
        switch SSL_get_error(ssl, status) {
        case SSL_ERROR_WANT_READ: return .wantsInput
        case SSL_ERROR_ZERO_RETURN: return .closeNotifyReceived
        default: return .failed(failure(during: "decrypting data from the peer"))
        }
    }

    /// Encrypts `plaintext` into records (taken with ``takeOutput()``).
    func write(_ plaintext: ByteBuffer) throws(TLSError) {
        guard plaintext.readableBytes > 0 else { return }
        ERR_clear_error()
        let status = plaintext.withUnsafeReadableBytes { source in
            var written = 0
            // The BIO never pushes back, so OpenSSL writes everything in one call.
            return SSL_write_ex(ssl, source.baseAddress, source.count, &written)
        }
        if status != 1 { throw failure(during: "encrypting data for the peer") }
    }

    /// Queues our `close_notify` alert; we do not wait for the peer's.
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// The ALPN protocol agreed in the handshake.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// `TLSv1.3` or `TLSv1.2`.
    var protocolVersion: String {
        String(cString: SSL_get_version(ssl))
    }

    /// Turns OpenSSL's error queue (and the certificate verification result) into a ``TLSError``.
    private func failure(during operation: String) -> TLSError {
        let entries = drainOpenSSLErrors()
        var reasons = entries.map(\.text)
        let verifyResult = SSL_get_verify_result(ssl)
        let code: TLSError.Code
        let noApplicationProtocolAlert = Int32(SSL_AD_REASON_OFFSET) + Int32(SSL_AD_NO_APPLICATION_PROTOCOL)
        if refusedForApplicationProtocol
            || entries.contains(where: {
                $0.reason == SSL_R_NO_APPLICATION_PROTOCOL || $0.reason == noApplicationProtocolAlert
            })
        {
            code = .noApplicationProtocol
        } else if verifyResult != X509_V_OK {
            reasons.append("certificate verification: \(String(cString: X509_verify_cert_error_string(verifyResult)))")
            code = .certificateVerificationFailed
        } else if !isHandshakeComplete {
            code = .handshakeFailed
        } else if entries.contains(where: { $0.reason == SSL_R_UNEXPECTED_EOF_WHILE_READING }) {
            code = .uncleanShutdown
        } else {
            code = .protocolFailure
        }
        if reasons.isEmpty && inputClosed { reasons.append("the peer closed the connection") }
        return TLSError(code: code, message: "\(operation) failed", reasons: reasons)
    }
}

// MARK: The ByteBuffer BIO (C function pointers: no captures; the connection comes back through BIO_get_data)

/// A BIO method whose reads and writes go to the ``TLSConnection`` stored in the BIO's data pointer.
func makeByteBufferBIOMethod() -> OpaquePointer? {
    guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "HabitFlow ByteBuffer BIO") else {
        return nil
    }
    _ = BIO_meth_set_write(method, byteBufferBIOWrite)
    _ = BIO_meth_set_read(method, byteBufferBIORead)
    _ = BIO_meth_set_ctrl(method, byteBufferBIOControl)
    _ = BIO_meth_set_create(method, byteBufferBIOCreate)
    _ = BIO_meth_set_destroy(method, byteBufferBIODestroy)
    return method
}

private let retryFlags = BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY

private func connection(of bio: OpaquePointer?) -> TLSConnection? {
    guard let bio, let data = BIO_get_data(bio) else { return nil }
    return Unmanaged<TLSConnection>.fromOpaque(data).takeUnretainedValue()
}

private func byteBufferBIOWrite(_ bio: OpaquePointer?, _ data: UnsafePointer<CChar>?, _ length: Int32) -> Int32 {
    guard let connection = connection(of: bio), let data, length >= 0 else { return -1 }
    BIO_clear_flags(bio, retryFlags)
    connection.appendOutput(UnsafeRawBufferPointer(start: data, count: Int(length)))
    return length
}

private func byteBufferBIORead(_ bio: OpaquePointer?, _ data: UnsafeMutablePointer<CChar>?, _ length: Int32) -> Int32 {
    guard let connection = connection(of: bio), let data, length >= 0 else { return -1 }
    BIO_clear_flags(bio, retryFlags)
    let copied = connection.consumeInput(into: UnsafeMutableRawBufferPointer(start: data, count: Int(length)))
    if copied > 0 || length == 0 { return Int32(copied) }
    if connection.inputClosed { return 0 }  // end of file
    BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)  // no data yet: "try again later"
    return -1
}

private func byteBufferBIOControl(
    _ bio: OpaquePointer?,
    _ command: Int32,
    _ argument: Int,
    _ pointer: UnsafeMutableRawPointer?
) -> Int {
    switch command {
    case BIO_CTRL_FLUSH:
        return 1
    case BIO_CTRL_EOF:
        guard let connection = connection(of: bio) else { return 1 }
        return connection.inputClosed && connection.pendingInputBytes == 0 ? 1 : 0
    case BIO_CTRL_PENDING:
        return connection(of: bio)?.pendingInputBytes ?? 0
    case BIO_CTRL_WPENDING:
        return 0
    case BIO_CTRL_GET_CLOSE:
        return Int(BIO_get_shutdown(bio))
    case BIO_CTRL_SET_CLOSE:
        BIO_set_shutdown(bio, Int32(truncatingIfNeeded: argument))
        return 1
    default:
        return 0
    }
}

private func byteBufferBIOCreate(_ bio: OpaquePointer?) -> Int32 {
    BIO_set_init(bio, 1)
    return 1
}

private func byteBufferBIODestroy(_ bio: OpaquePointer?) -> Int32 {
    1
}
