public import Foundation
internal import HabitFlowBase64
internal import HabitFlowCrypto
internal import HabitFlowServiceKit
internal import Logging

/// Everything the auth service can be configured with beyond the common service configuration, with the
/// production defaults. ``fromEnvironment(_:internalSecret:)`` reads it for the executable (the variables are listed
/// in Services/Auth/README.md); tests build one directly.
public struct AuthSettings: Sendable {
    /// The `iss` and `aud` claims of access tokens.
    public var issuer = "habitflow-auth"
    public var audience = "habitflow"
    /// Access tokens: 24 hours (seed 004 SEC-003).
    public var accessTokenLifetime: Duration = .seconds(24 * 3600)
    /// Refresh tokens and the sessions they keep alive: 30 days (SEC-004).
    public var refreshTokenLifetime: Duration = .seconds(30 * 24 * 3600)

    /// A signing key signs for this long before a new one takes over.
    public var keyRotationInterval: Duration = .seconds(30 * 24 * 3600)
    /// A new key is published this long before it starts signing, so verifiers (the gateway refreshes its key set
    /// every few minutes) know it before they meet a token it signed.
    public var keyPublicationLead: Duration = .seconds(600)
    /// The AES-256 key that seals signing keys in the database. Required in production; when nil, one is derived
    /// from the internal secret (see ``fromEnvironment(_:internalSecret:)``).
    public var keyEncryptionKey: [UInt8]

    /// bcrypt cost of new password hashes. 12 in production (SEC-002); tests may lower it.
    public var bcryptCost = BCrypt.defaultCost
    /// Threads that run bcrypt; default one per core.
    public var passwordHashingThreads: Int?

    public var loginAccountThrottle = ThrottlePolicy(
        freeAttempts: 5, window: .seconds(900), initialDelay: .seconds(2), maximumDelay: .seconds(900))
    public var loginAddressThrottle = ThrottlePolicy(
        freeAttempts: 30, window: .seconds(900), initialDelay: .seconds(2), maximumDelay: .seconds(900))
    public var resetEmailThrottle = ThrottlePolicy(
        freeAttempts: 3, window: .seconds(3600), initialDelay: .seconds(60), maximumDelay: .seconds(3600))
    public var resetAddressThrottle = ThrottlePolicy(
        freeAttempts: 20, window: .seconds(3600), initialDelay: .seconds(60), maximumDelay: .seconds(3600))

    /// Reset tokens: one hour. Email-change tokens: one day.
    public var passwordResetTokenLifetime: Duration = .seconds(3600)
    public var emailChangeTokenLifetime: Duration = .seconds(24 * 3600)

    /// Where mail goes: SMTP when set, else files in ``mailDropFolder``.
    public var smtp: SMTPConfiguration?
    /// Without SMTP (a local stack), each mail is a file in this folder (``MailDropTransport``).
    public var mailDropFolder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("habitflow-mail").path
    /// The `From` of every mail.
    public var mailSender = "HabitFlow <no-reply@habitflow.local>"
    /// Links in mails are this followed by `reset-password?token=…` or `confirm-email?token=…`.
    public var linkBaseURL = "habitflow://auth/"
    /// How often the mail sender looks for mail other replicas enqueued.
    public var mailPollInterval: Duration = .seconds(5)

    /// Social login providers; a provider that is not configured refuses its tokens.
    public var google: SocialProviderSettings?
    public var apple: SocialProviderSettings?

    /// How often old rows (ended sessions, used tokens, retired keys, stale throttling) are removed; nil: never
    /// (tests that move their clock must not delete rows of tests that do not).
    public var maintenanceInterval: Duration? = .seconds(3600)

    /// The clock every expiry is computed with.
    public var clock: any AuthClock = SystemClock()

    public init(keyEncryptionKey: [UInt8]) {
        self.keyEncryptionKey = keyEncryptionKey
    }
}

/// One OpenID Connect provider: who issues its ID tokens, for which client ids, and where its keys are.
public struct SocialProviderSettings: Sendable {
    /// Accepted `iss` values.
    public var issuers: [String]
    /// Accepted `aud` values: our app's client ids at the provider (iOS, Android, web may differ).
    public var clientIDs: [String]
    /// The provider's JSON Web Key Set.
    public var keys: KeySource

    public enum KeySource: Sendable, Hashable {
        case file(String)
        case url(URL)
    }

    public init(issuers: [String], clientIDs: [String], keys: KeySource) {
        self.issuers = issuers
        self.clientIDs = clientIDs
        self.keys = keys
    }

    public static let googleIssuers = ["https://accounts.google.com", "accounts.google.com"]
    public static let googleKeysURL = "https://www.googleapis.com/oauth2/v3/certs"
    public static let appleIssuers = ["https://appleid.apple.com"]
    public static let appleKeysURL = "https://appleid.apple.com/auth/keys"
}

/// A setting that cannot be used.
public struct AuthConfigurationError: Error, CustomStringConvertible, Sendable {
    public var variable: String
    public var reason: String
    public var description: String { "\(variable): \(reason)" }
}

extension AuthSettings {
    /// Reads the settings from environment variables (Services/Auth/README.md lists them).
    ///
    /// Without `HABITFLOW_AUTH_KEY_ENCRYPTION_KEY` the key that seals signing keys is derived from the internal
    /// secret (HMAC-SHA-256), which suits the local stack; `warnings` says so, so production can refuse to start.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment, internalSecret: String
    ) throws -> (settings: AuthSettings, warnings: [String]) {
        var warnings: [String] = []
        func value(_ name: String) -> String? {
            environment[name].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
        }
        func seconds(_ name: String) throws -> Duration? {
            guard let text = value(name) else { return nil }
            guard let seconds = Int(text), seconds > 0 else {
                throw AuthConfigurationError(variable: name, reason: "expected a positive number of seconds")
            }
            return .seconds(seconds)
        }
        func list(_ name: String) -> [String] {
            (value(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
        }

        let keyEncryptionKey: [UInt8]
        if let encoded = value("HABITFLOW_AUTH_KEY_ENCRYPTION_KEY") {
            guard let key = Base64.decode(encoded), key.count == AES256GCM.keyByteCount else {
                throw AuthConfigurationError(
                    variable: "HABITFLOW_AUTH_KEY_ENCRYPTION_KEY", reason: "expected 32 bytes in standard base64")
            }
            keyEncryptionKey = Array(key)
        } else {
            keyEncryptionKey = SHA256.hmac(
                key: Array(internalSecret.utf8), data: Array("habitflow-auth signing-key sealing".utf8))
            warnings.append(
                "HABITFLOW_AUTH_KEY_ENCRYPTION_KEY is not set: signing keys are sealed with a key derived from the "
                    + "internal secret"
            )
        }

        var settings = AuthSettings(keyEncryptionKey: keyEncryptionKey)
        if let issuer = value("HABITFLOW_AUTH_ISSUER") { settings.issuer = issuer }
        if let audience = value("HABITFLOW_AUTH_AUDIENCE") { settings.audience = audience }
        if let interval = try seconds("HABITFLOW_AUTH_KEY_ROTATION_SECONDS") { settings.keyRotationInterval = interval }
        if let lead = try seconds("HABITFLOW_AUTH_KEY_PUBLICATION_LEAD_SECONDS") { settings.keyPublicationLead = lead }

        if let host = value("HABITFLOW_SMTP_HOST") {
            let portText = value("HABITFLOW_SMTP_PORT") ?? "25"
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw AuthConfigurationError(variable: "HABITFLOW_SMTP_PORT", reason: "expected a port number")
            }
            settings.smtp = SMTPConfiguration(host: host, port: port)
        }
        if let folder = value("HABITFLOW_MAIL_DIR") { settings.mailDropFolder = folder }
        if let sender = value("HABITFLOW_MAIL_FROM") { settings.mailSender = sender }
        if let base = value("HABITFLOW_AUTH_LINK_BASE_URL") { settings.linkBaseURL = base }

        settings.google = try provider(
            "GOOGLE", defaultIssuers: SocialProviderSettings.googleIssuers,
            defaultKeysURL: SocialProviderSettings.googleKeysURL, value: value, list: list)
        settings.apple = try provider(
            "APPLE", defaultIssuers: SocialProviderSettings.appleIssuers,
            defaultKeysURL: SocialProviderSettings.appleKeysURL, value: value, list: list)
        return (settings, warnings)
    }

    /// `HABITFLOW_<NAME>_CLIENT_IDS` enables a provider; `_ISSUERS`, `_JWKS_FILE` or `_JWKS_URL` override defaults.
    private static func provider(
        _ name: String, defaultIssuers: [String], defaultKeysURL: String, value: (String) -> String?,
        list: (String) -> [String]
    ) throws -> SocialProviderSettings? {
        let clientIDs = list("HABITFLOW_\(name)_CLIENT_IDS")
        guard !clientIDs.isEmpty else { return nil }
        let issuers = list("HABITFLOW_\(name)_ISSUERS")
        let keys: SocialProviderSettings.KeySource
        if let file = value("HABITFLOW_\(name)_JWKS_FILE") {
            keys = .file(file)
        } else {
            let text = value("HABITFLOW_\(name)_JWKS_URL") ?? defaultKeysURL
            guard let url = URL(string: text), url.scheme == "https" || url.scheme == "http" else {
                throw AuthConfigurationError(variable: "HABITFLOW_\(name)_JWKS_URL", reason: "expected an http(s) URL")
            }
            keys = .url(url)
        }
        return SocialProviderSettings(
            issuers: issuers.isEmpty ? defaultIssuers : issuers, clientIDs: clientIDs, keys: keys)
    }
}

extension AuthSettings {
    /// The settings of a service host: from its environment, with the internal secret of its configuration; each
    /// warning is logged.
    static func fromEnvironment(runtime: ServiceRuntime) throws -> AuthSettings {
        let (settings, warnings) = try fromEnvironment(internalSecret: runtime.configuration.internalSecret)
        for warning in warnings { runtime.logger.warning("\(warning)") }
        return settings
    }
}
