internal import COpenSSL

/// An OpenSSL `SSL_CTX` built once from a ``TLSConfiguration`` and shared by every connection that uses it.
///
/// Creating a context loads and checks the certificates, the key and the trust roots, so a bad file fails at start-up
/// rather than at the first connection. Create one per configuration and hand it to each ``TLSHandler``.
public final class TLSContext: @unchecked Sendable {
    // @unchecked Sendable: the only mutable state is inside OpenSSL. Every setting of the SSL_CTX (and the BIO
    // method) is made in `init`, before the object is shared; afterwards connections only call SSL_new on it, which
    // OpenSSL documents as safe from any number of threads at once (the SSL_CTX is reference-counted and locked
    // internally). No property of this class is ever reassigned.

    /// The configuration this context was built from.
    public let configuration: TLSConfiguration

    let sslContext: OpaquePointer
    /// The BIO method connecting each SSL object to a connection's ByteBuffers.
    let bioMethod: OpaquePointer
    let isServer: Bool
    /// The server's ALPN protocols as bytes, most preferred first (empty on clients).
    let serverApplicationProtocols: [[UInt8]]
    let requiresApplicationProtocol: Bool

    /// Builds the context, loading every certificate, key and trust store the configuration names.
    public init(configuration: TLSConfiguration) throws(TLSError) {
        ERR_clear_error()
        let isServer: Bool
        switch configuration.role {
        case .server: isServer = true
        case .client: isServer = false
        }
        guard let sslContext = SSL_CTX_new(isServer ? TLS_server_method() : TLS_client_method()) else {
            throw TLSError.openSSL(.invalidConfiguration, "SSL_CTX_new")
        }
        guard let bioMethod = makeByteBufferBIOMethod() else {
            SSL_CTX_free(sslContext)
            throw TLSError.openSSL(.invalidConfiguration, "BIO_meth_new")
        }
        do {
            try Self.configureCommon(sslContext)
            switch configuration.role {
            case .server(let server): try Self.configure(sslContext, server: server)
            case .client(let client): try Self.configure(sslContext, client: client)
            }
        } catch {
            SSL_CTX_free(sslContext)
            BIO_meth_free(bioMethod)
            throw error
        }

        self.configuration = configuration
        self.sslContext = sslContext
        self.bioMethod = bioMethod
        self.isServer = isServer
        if case .server(let server) = configuration.role {
            self.serverApplicationProtocols = server.applicationProtocols.map { Array($0.utf8) }
            self.requiresApplicationProtocol = server.requiresApplicationProtocol && !server.applicationProtocols.isEmpty
        } else {
            self.serverApplicationProtocols = []
            self.requiresApplicationProtocol = false
        }

        // The callbacks get `self` unretained: every SSL made from this context belongs to a TLSConnection that keeps
        // this context alive, so `self` outlives every callback.
        if isServer {
            let unretainedSelf = Unmanaged.passUnretained(self).toOpaque()
            if !serverApplicationProtocols.isEmpty {
                SSL_CTX_set_alpn_select_cb(sslContext, selectApplicationProtocol, unretainedSelf)
            }
            if requiresApplicationProtocol {
                SSL_CTX_set_client_hello_cb(sslContext, requireApplicationProtocolExtension, unretainedSelf)
            }
        }
    }

    deinit {
        SSL_CTX_free(sslContext)
        BIO_meth_free(bioMethod)
    }

    /// The OpenSSL version linked at run time, for example `OpenSSL 3.0.19 27 Jan 2026`.
    public static var libraryVersion: String {
        String(cString: OpenSSL_version(OPENSSL_VERSION))
    }

    // MARK: Configuration steps

    private static func configureCommon(_ sslContext: OpaquePointer) throws(TLSError) {
        // TLS 1.3 has no renegotiation; refuse it under TLS 1.2 too (it is a DoS vector and HTTP/2 forbids it).
        let noRenegotiation: UInt64 = 1 << 30  // SSL_OP_NO_RENEGOTIATION (a function-like macro, not imported)
        _ = SSL_CTX_set_options(sslContext, noRenegotiation)
        // Free the record buffers of idle connections.
        _ = SSL_CTX_ctrl(sslContext, SSL_CTRL_MODE, Int(SSL_MODE_RELEASE_BUFFERS), nil)
    }

    private static func configure(
        _ sslContext: OpaquePointer,
        server: TLSConfiguration.Server
    ) throws(TLSError) {
        try setMinimumVersion(sslContext, server.minimumVersion)
        let cipherServerPreference: UInt64 = 1 << 22  // SSL_OP_CIPHER_SERVER_PREFERENCE
        _ = SSL_CTX_set_options(sslContext, cipherServerPreference)
        try useIdentity(sslContext, server.identity)

        let sessionContext = Array("habitflow".utf8)
        try requireOne(
            SSL_CTX_set_session_id_context(sslContext, sessionContext, UInt32(sessionContext.count)),
            "SSL_CTX_set_session_id_context")

        if let roots = server.clientCertificateTrustRoots {
            try loadTrustRoots(sslContext, roots)
            SSL_CTX_set_verify(sslContext, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        } else {
            SSL_CTX_set_verify(sslContext, SSL_VERIFY_NONE, nil)
        }
        for name in server.applicationProtocols where name.utf8.isEmpty || name.utf8.count > 255 {
            throw TLSError(code: .invalidConfiguration, message: "ALPN protocol name must be 1 to 255 bytes: '\(name)'")
        }
    }

    private static func configure(
        _ sslContext: OpaquePointer,
        client: TLSConfiguration.Client
    ) throws(TLSError) {
        try setMinimumVersion(sslContext, client.minimumVersion)
        if client.verifiesServerCertificate {
            try loadTrustRoots(sslContext, client.trustRoots)
            SSL_CTX_set_verify(sslContext, SSL_VERIFY_PEER, nil)
        } else {
            SSL_CTX_set_verify(sslContext, SSL_VERIFY_NONE, nil)
        }
        if let identity = client.identity {
            try useIdentity(sslContext, identity)
        }
        if !client.applicationProtocols.isEmpty {
            let wire = try alpnWireFormat(client.applicationProtocols)
            // SSL_CTX_set_alpn_protos returns 0 on success, unlike almost everything else.
            guard SSL_CTX_set_alpn_protos(sslContext, wire, UInt32(wire.count)) == 0 else {
                throw TLSError.openSSL(.invalidConfiguration, "SSL_CTX_set_alpn_protos")
            }
        }
    }

    private static func setMinimumVersion(
        _ sslContext: OpaquePointer,
        _ version: TLSConfiguration.TLSVersion
    ) throws(TLSError) {
        let value =
            switch version {
            case .tls12: TLS1_2_VERSION
            case .tls13: TLS1_3_VERSION
            }
        // SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl.
        guard SSL_CTX_ctrl(sslContext, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(value), nil) == 1 else {
            throw TLSError.openSSL(.invalidConfiguration, "SSL_CTX_set_min_proto_version")
        }
    }

    /// Loads a certificate chain (leaf first, then intermediates) and its private key, and checks they match.
    private static func useIdentity(
        _ sslContext: OpaquePointer,
        _ identity: TLSConfiguration.Identity
    ) throws(TLSError) {
        let chain = try openPEM(identity.certificateChain, what: "certificate chain")
        defer { BIO_free(chain) }
        guard let leaf = PEM_read_bio_X509_AUX(chain, nil, nil, nil) else {
            throw TLSError.openSSL(.invalidConfiguration, "reading the leaf certificate")
        }
        defer { X509_free(leaf) }
        try requireOne(SSL_CTX_use_certificate(sslContext, leaf), "SSL_CTX_use_certificate")
        while let intermediate = PEM_read_bio_X509(chain, nil, nil, nil) {
            // SSL_CTX_add0_chain_cert (a macro) takes ownership of the certificate on success.
            if SSL_CTX_ctrl(sslContext, SSL_CTRL_CHAIN_CERT, 0, UnsafeMutableRawPointer(intermediate)) != 1 {
                X509_free(intermediate)
                throw TLSError.openSSL(.invalidConfiguration, "adding an intermediate certificate")
            }
        }
        ERR_clear_error()  // the loop ends on "no start line", which is not an error

        let keyPEM = try openPEM(identity.privateKey, what: "private key")
        defer { BIO_free(keyPEM) }
        guard let key = PEM_read_bio_PrivateKey(keyPEM, nil, nil, nil) else {
            throw TLSError.openSSL(.invalidConfiguration, "reading the private key")
        }
        defer { EVP_PKEY_free(key) }
        try requireOne(SSL_CTX_use_PrivateKey(sslContext, key), "SSL_CTX_use_PrivateKey")
        try requireOne(SSL_CTX_check_private_key(sslContext), "the private key does not match the certificate")
    }

    private static func loadTrustRoots(
        _ sslContext: OpaquePointer,
        _ roots: TLSConfiguration.TrustRoots
    ) throws(TLSError) {
        switch roots {
        case .systemDefault:
            try requireOne(SSL_CTX_set_default_verify_paths(sslContext), "SSL_CTX_set_default_verify_paths")
        case .certificates(let source):
            let pem = try openPEM(source, what: "trust roots")
            defer { BIO_free(pem) }
            let store = SSL_CTX_get_cert_store(sslContext)
            var count = 0
            while let certificate = PEM_read_bio_X509(pem, nil, nil, nil) {
                defer { X509_free(certificate) }
                try requireOne(X509_STORE_add_cert(store, certificate), "X509_STORE_add_cert")
                count += 1
            }
            ERR_clear_error()
            if count == 0 {
                throw TLSError(code: .invalidConfiguration, message: "no certificate found in the trust roots")
            }
        }
    }

    /// A read-only BIO over PEM data; the caller frees it.
    private static func openPEM(_ source: TLSConfiguration.PEMSource, what: String) throws(TLSError) -> OpaquePointer {
        switch source.storage {
        case .file(let path):
            guard let bio = BIO_new_file(path, "r") else {
                throw TLSError.openSSL(.invalidConfiguration, "opening the \(what) file \(path)")
            }
            return bio
        case .bytes(let bytes):
            // A memory BIO that copies the bytes, so nothing in Swift has to outlive it.
            guard let bio = BIO_new(BIO_s_mem()) else { throw TLSError.openSSL(.invalidConfiguration, "BIO_new") }
            let written = bytes.withUnsafeBytes { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
            guard written == bytes.count else {
                BIO_free(bio)
                throw TLSError.openSSL(.invalidConfiguration, "buffering the \(what)")
            }
            return bio
        }
    }

    /// ALPN's wire format: each name preceded by its length in one byte.
    private static func alpnWireFormat(_ names: [String]) throws(TLSError) -> [UInt8] {
        var wire: [UInt8] = []
        for name in names {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSError(code: .invalidConfiguration, message: "ALPN protocol name must be 1 to 255 bytes: '\(name)'")
            }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return wire
    }

    // MARK: Per connection

    /// A new SSL object for one connection, with host name checks and SNI for `serverName` on clients.
    func makeSSL(serverName: String?) throws(TLSError) -> OpaquePointer {
        ERR_clear_error()
        guard let ssl = SSL_new(sslContext) else { throw TLSError.openSSL(.invalidConfiguration, "SSL_new") }
        guard case .client(let client) = configuration.role else {
            SSL_set_accept_state(ssl)
            return ssl
        }
        SSL_set_connect_state(ssl)
        guard let serverName = serverName ?? client.serverName, !serverName.isEmpty else {
            if client.verifiesServerCertificate {
                SSL_free(ssl)
                throw TLSError(
                    code: .invalidConfiguration,
                    message: "a client that verifies the server needs a server name (configuration or TLSHandler)")
            }
            return ssl
        }
        let parameters = SSL_get0_param(ssl)
        // An IP address is matched against the certificate's IP SANs and is never sent as SNI (RFC 6066).
        let isIPAddress = X509_VERIFY_PARAM_set1_ip_asc(parameters, serverName) == 1
        ERR_clear_error()
        if !isIPAddress {
            let sniSet = serverName.withCString {
                SSL_ctrl(
                    ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0))
            }
            guard sniSet == 1 else {
                SSL_free(ssl)
                throw TLSError.openSSL(.invalidConfiguration, "setting SNI to '\(serverName)'")
            }
            if client.verifiesServerCertificate {
                let noPartialWildcards: UInt32 = 0x4  // X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS (x509v3.h, not in the shim)
                X509_VERIFY_PARAM_set_hostflags(parameters, noPartialWildcards)
                guard SSL_set1_host(ssl, serverName) == 1 else {
                    SSL_free(ssl)
                    throw TLSError.openSSL(.invalidConfiguration, "setting the expected host name '\(serverName)'")
                }
            }
        }
        return ssl
    }
}

// MARK: Server callbacks (C function pointers: no captures, `self` comes back through `arg`)

/// Picks the first of our protocols that the client offered (server preference), or refuses the handshake with
/// `no_application_protocol` when there is none.
private func selectApplicationProtocol(
    _ ssl: OpaquePointer?,
    _ selected: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ selectedLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?,
    _ offeredLength: UInt32,
    _ arg: UnsafeMutableRawPointer?
) -> Int32 {
    guard let arg, let selected, let selectedLength, let offered else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let context = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
    let offeredList = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
    for wanted in context.serverApplicationProtocols {
        var index = 0
        while index < offeredList.count {
            let length = Int(offeredList[index])
            let start = index + 1
            guard start + length <= offeredList.count else { break }  // malformed list: stop
            if length == wanted.count && offeredList[start..<(start + length)].elementsEqual(wanted) {
                // Points into the client's list, which OpenSSL copies as soon as this returns.
                selected.pointee = offered + start
                selectedLength.pointee = UInt8(length)
                return SSL_TLSEXT_ERR_OK
            }
            index = start + length
        }
    }
    TLSConnection.from(ssl)?.refusedForApplicationProtocol = true
    return SSL_TLSEXT_ERR_ALERT_FATAL
}

/// Refuses a ClientHello without an ALPN extension (``TLSConfiguration/Server/requiresApplicationProtocol``).
private func requireApplicationProtocolExtension(
    _ ssl: OpaquePointer?,
    _ alert: UnsafeMutablePointer<Int32>?,
    _ arg: UnsafeMutableRawPointer?
) -> Int32 {
    var extensionData: UnsafePointer<UInt8>?
    var extensionLength = 0
    let present = SSL_client_hello_get0_ext(
        ssl, UInt32(TLSEXT_TYPE_application_layer_protocol_negotiation), &extensionData, &extensionLength)
    if present == 1 { return SSL_CLIENT_HELLO_SUCCESS }
    alert?.pointee = SSL_AD_NO_APPLICATION_PROTOCOL
    TLSConnection.from(ssl)?.refusedForApplicationProtocol = true
    return SSL_CLIENT_HELLO_ERROR
}
