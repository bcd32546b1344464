/// Everything a ``TLSContext`` needs: the role (server or client) with its certificates and trust, ALPN and versions.
///
/// Build one with ``server(certificateChain:privateKey:configure:)`` or ``client(serverName:trustRoots:configure:)``;
/// every setting that is not a parameter has a documented default that `configure` may change.
public struct TLSConfiguration: Sendable {
    /// Which side of the handshake this configuration is for.
    public enum Role: Sendable {
        case server(Server)
        case client(Client)
    }

    public var role: Role

    public init(role: Role) {
        self.role = role
    }

    /// A server that presents `certificateChain` (leaf first) signed with `privateKey`.
    public static func server(
        certificateChain: PEMSource,
        privateKey: PEMSource,
        configure: (_ server: inout Server) -> Void = { _ in }
    ) -> TLSConfiguration {
        var server = Server(identity: Identity(certificateChain: certificateChain, privateKey: privateKey))
        configure(&server)
        return TLSConfiguration(role: .server(server))
    }

    /// A client that expects a certificate for `serverName` issued by one of `trustRoots`.
    ///
    /// `serverName` (a DNS name or an IP address) is sent as SNI when it is a DNS name, and checked against the
    /// server's certificate. Pass `nil` when each connection names its server (``TLSHandler/init(context:serverName:)``).
    public static func client(
        serverName: String?,
        trustRoots: TrustRoots = .systemDefault,
        configure: (_ client: inout Client) -> Void = { _ in }
    ) -> TLSConfiguration {
        var client = Client(serverName: serverName, trustRoots: trustRoots)
        configure(&client)
        return TLSConfiguration(role: .client(client))
    }
}

extension TLSConfiguration {
    /// Server settings.
    public struct Server: Sendable {
        /// The certificate chain and private key presented to clients.
        public var identity: Identity

        /// The lowest protocol version accepted.
        ///
        /// Default ``TLSVersion/tls13``: our gateway speaks TLS 1.3 only; set ``TLSVersion/tls12`` for older clients.
        public var minimumVersion: TLSVersion = .tls13

        /// ALPN protocols the server accepts, most preferred first. Default `["h2"]`.
        ///
        /// A client whose ALPN list shares none of these is refused with a `no_application_protocol` alert
        /// (RFC 7301). Empty: ALPN is ignored.
        public var applicationProtocols: [String] = ["h2"]

        /// Whether a client that sends no ALPN extension at all is refused (`no_application_protocol`). Default
        /// `false`: such a handshake completes with no negotiated protocol and the layer above decides, from
        /// ``TLSHandshakeCompleted/negotiatedProtocol``.
        public var requiresApplicationProtocol: Bool = false

        /// When set, clients must present a certificate issued by one of these roots (mutual TLS). Default `nil`:
        /// no client certificate is asked for.
        public var clientCertificateTrustRoots: TrustRoots? = nil

        public init(identity: Identity) {
            self.identity = identity
        }
    }

    /// Client settings.
    public struct Client: Sendable {
        /// The host name or IP address expected in the server's certificate, also sent as SNI (DNS names only).
        public var serverName: String?

        /// The certificate authorities trusted to issue the server's certificate. Default: the system store.
        public var trustRoots: TrustRoots = .systemDefault

        /// Whether the server's certificate is verified at all (chain and host name). Default `true`.
        ///
        /// - Important: Turning this off accepts any server, including an attacker's; it exists for local tools only.
        public var verifiesServerCertificate: Bool = true

        /// A certificate and key to present when the server asks for one (mutual TLS). Default `nil`.
        public var identity: Identity? = nil

        /// The lowest protocol version accepted. Default ``TLSVersion/tls12``, because a client also talks to
        /// servers we do not run; our own servers insist on TLS 1.3.
        public var minimumVersion: TLSVersion = .tls12

        /// ALPN protocols offered, most preferred first. Default `["h2"]`; empty sends no ALPN extension.
        public var applicationProtocols: [String] = ["h2"]

        public init(serverName: String?, trustRoots: TrustRoots = .systemDefault) {
            self.serverName = serverName
            self.trustRoots = trustRoots
        }
    }

    /// A certificate chain (leaf first) and the private key of the leaf.
    public struct Identity: Sendable {
        public var certificateChain: PEMSource
        public var privateKey: PEMSource

        public init(certificateChain: PEMSource, privateKey: PEMSource) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
        }
    }

    /// Certificate authorities trusted to issue the peer's certificate.
    public enum TrustRoots: Sendable {
        /// The operating system's store (Debian: `/etc/ssl/certs`, from `ca-certificates`).
        case systemDefault
        /// Only the certificates in this PEM data (one or more).
        case certificates(PEMSource)
    }

    /// PEM-encoded data, read from a file when the context is created or given in memory.
    public struct PEMSource: Sendable {
        enum Storage: Sendable {
            case file(String)
            case bytes([UInt8])
        }

        let storage: Storage

        /// The PEM file at `path`.
        public static func file(_ path: String) -> PEMSource { PEMSource(storage: .file(path)) }

        /// PEM text in memory.
        public static func bytes(_ bytes: some Sequence<UInt8>) -> PEMSource { PEMSource(storage: .bytes(Array(bytes))) }

        /// PEM text in memory.
        public static func string(_ pem: String) -> PEMSource { PEMSource(storage: .bytes(Array(pem.utf8))) }
    }

    /// A TLS protocol version.
    public enum TLSVersion: Sendable, Hashable, Comparable {
        case tls12
        case tls13
    }
}
