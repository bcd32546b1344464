import Foundation
import HabitFlowCrypto
import HabitFlowLocking
import HabitFlowPostgres
import HabitFlowServiceAPI
import HabitFlowTestSupport
import Logging
import Testing

@testable import HabitFlowAuth

@Suite("SMTP client against a fake mail server on loopback")
struct SMTPClientTests {
    @Test("delivers a mail: envelope, headers, dot-stuffed body, QUIT")
    func delivers() async throws {
        let server = try await FakeSMTPServer.start()
        let transport = SMTPMailTransport(configuration: SMTPConfiguration(host: "127.0.0.1", port: server.port))
        let body = "Hello,\n.leading dot line\n..two dots\nend"
        try await transport.send(
            MailMessage(
                from: "HabitFlow <no-reply@habitflow.test>", to: "ana@example.com", subject: "Hi Ana", body: body))
        let mail = try #require(server.received.first)
        #expect(mail.from == "no-reply@habitflow.test")
        #expect(mail.recipients == ["ana@example.com"])
        #expect(mail.ehlo == "habitflow-auth")
        #expect(mail.data.contains("Subject: Hi Ana\r\n"))
        #expect(mail.data.contains("To: <ana@example.com>\r\n"))
        #expect(mail.data.contains("Content-Transfer-Encoding: 7bit\r\n"))
        #expect(mail.data.hasSuffix("\r\n\r\nHello,\r\n.leading dot line\r\n..two dots\r\nend"))
        await server.stop()
    }

    @Test("non-ASCII subjects are RFC 2047 encoded and non-ASCII bodies base64")
    func encodes() async throws {
        let server = try await FakeSMTPServer.start()
        let transport = SMTPMailTransport(configuration: SMTPConfiguration(host: "127.0.0.1", port: server.port))
        try await transport.send(
            MailMessage(from: "a@habitflow.test", to: "b@example.com", subject: "Grüße", body: "Schöne Grüße"))
        let mail = try #require(server.received.first?.data)
        #expect(mail.contains("Subject: =?UTF-8?B?\(Data("Grüße".utf8).base64EncodedString())?="))
        #expect(mail.contains("Content-Transfer-Encoding: base64"))
        #expect(mail.contains(Data("Schöne Grüße".utf8).base64EncodedString()))
        await server.stop()
    }

    @Test("a rejected recipient is a permanent SMTPError; a deferred DATA a transient one")
    func rejections() async throws {
        let server = try await FakeSMTPServer.start(behavior: .rejectRecipients)
        let transport = SMTPMailTransport(configuration: SMTPConfiguration(host: "127.0.0.1", port: server.port))
        let message = MailMessage(from: "a@habitflow.test", to: "b@example.com", subject: "s", body: "b")
        let rejected = await #expect(throws: SMTPError.self) { try await transport.send(message) }
        #expect(rejected?.code == 550)
        #expect(rejected?.isTransient == false)
        server.setBehavior(.deferData)
        let deferred = await #expect(throws: SMTPError.self) { try await transport.send(message) }
        #expect(deferred?.code == 421)
        #expect(deferred?.isTransient == true)
        #expect(server.received.isEmpty)
        await server.stop()
    }

    @Test("a server that hangs up or never answers fails the delivery instead of hanging; bad addresses never reach it")
    func brokenServers() async throws {
        let server = try await FakeSMTPServer.start(behavior: .hangUpAfterGreeting)
        var configuration = SMTPConfiguration(host: "127.0.0.1", port: server.port)
        configuration.timeout = .milliseconds(500)
        let transport = SMTPMailTransport(configuration: configuration)
        let message = MailMessage(from: "a@habitflow.test", to: "b@example.com", subject: "s", body: "b")
        let hungUp = await #expect(throws: SMTPError.self) { try await transport.send(message) }
        #expect(hungUp?.code == 0)
        server.setBehavior(.silent)
        let started = ContinuousClock.now
        await #expect(throws: SMTPError.self) { try await transport.send(message) }
        #expect(ContinuousClock.now - started < .seconds(5))

        let connections = server.connectionCount
        let injected = MailMessage(
            from: "a@habitflow.test", to: "b@example.com>\r\nRCPT TO:<c@example.com", subject: "s", body: "b")
        await #expect(throws: SMTPError.self) { try await transport.send(injected) }
        #expect(server.connectionCount == connections)
        await server.stop()

        // Nobody listening.
        let closed = SMTPMailTransport(configuration: SMTPConfiguration(host: "127.0.0.1", port: server.port))
        await #expect(throws: (any Error).self) { try await closed.send(message) }
    }
}

extension AuthServiceTests {
    // Inside the serialized auth suite: a dispatcher sends whatever mail is due in the shared table.
    @Suite("mail outbox dispatcher")
    struct MailDispatcherTests {
        /// Fails every mail to `failing` once, forwards everything else (other tests' mail too) to `next`.
        final class FlakyTransport: MailTransport {
            let failing: String
            let next: any MailTransport
            let failures = Locked(0)
            init(failing: String, next: any MailTransport) {
                self.failing = failing
                self.next = next
            }
            func send(_ message: MailMessage) async throws {
                if message.to == failing,
                    failures.withLock({
                        $0 += 1; return $0
                    }) == 1
                {
                    throw SMTPError(code: 451, reply: "try later", command: "RCPT")
                }
                try await next.send(message)
            }
        }

        @Test("a failed delivery is retried later with backoff; sent mail leaves the outbox")
        func retries() async throws {
            let server = try await FakeSMTPServer.start()
            var configuration = PostgresPool.Configuration(connectionString: try await AuthTestDatabase.shared.url())
            configuration.maximumConnections = 2
            let pool = PostgresPool(configuration: configuration, logger: testLogger)
            try await PostgresMigrations.migrate(
                service: "auth", pool: pool, directory: TestEnvironment.sqlRoot + "/auth", logger: testLogger)
            let recipient = "flaky-\(UUID().uuidString.prefix(8))@example.com"
            let clock = ManualClock()
            let transport = FlakyTransport(
                failing: recipient,
                next: SMTPMailTransport(configuration: SMTPConfiguration(host: "127.0.0.1", port: server.port)))
            let dispatcher = MailDispatcher(
                store: AuthStore(pool: pool), transport: transport, sender: "no-reply@habitflow.test", clock: clock, logger: testLogger,
                pollInterval: .seconds(60))
            try await AuthStore(pool: pool).enqueueMail(
                AccountMail(recipient: recipient, subject: "Retry me", body: "body"), userID: nil, now: clock.now())
            await dispatcher.sendDue()
            let failed = try #require(
                try await pool.queryRow(
                    "SELECT attempts, last_error, next_attempt_at FROM mail_outbox WHERE recipient = \(recipient)"))
            #expect(try failed.decode(0, as: Int.self) == 1)
            #expect(try failed.decode(1, as: String.self).contains("451"))
            #expect(try failed.decode(2, as: Date.self) > clock.now().addingTimeInterval(25))

            clock.advance(seconds: 31)
            await dispatcher.sendDue()
            #expect(server.messages(to: recipient).count == 1)
            #expect(
                try await pool.queryRow("SELECT count(*) FROM mail_outbox WHERE recipient = \(recipient)")?.decode(
                    0, as: Int.self) == 0)
            await pool.shutdown()
            await server.stop()
        }

        @Test("without SMTP the local stack writes each mail as a file; the log names only the file")
        func dropsMailInAFolder() async throws {
            let records = LogCapture()
            let logger = Logger(label: "mail-test") { _ in records }
            let folder = NSTemporaryDirectory() + "habitflow-mail-test-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: folder) }
            try await MailDropTransport(folder: folder, logger: logger).send(
                MailMessage(from: "a@habitflow.test", to: "b@example.com", subject: "Reset", body: "token 123"))
            let files = try FileManager.default.contentsOfDirectory(atPath: folder)
            let file = try #require(files.first)
            #expect(files.count == 1 && file.hasSuffix(".eml"))
            let path = folder + "/" + file
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.contains("To: b@example.com\r\n") && text.contains("Subject: Reset\r\n"))
            #expect(text.hasSuffix("\r\n\r\ntoken 123"))
            let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)
            let entry = try #require(records.entries.first)
            #expect(entry.level == .notice)
            #expect(entry.metadata["file"] == path)
            let logged = "\(entry.message) \(entry.metadata)"
            #expect(!logged.contains("b@example.com") && !logged.contains("token 123"))
        }
    }
}

@Suite("passwords, throttling policy, settings")
struct AuthUnitTests {
    @Test("the production hasher uses bcrypt cost 12 ($2b$12$) and verifies in constant time")
    func productionCost() async throws {
        let hasher = PasswordHasher()
        #expect(hasher.cost == 12)
        let hash = try await hasher.hash("correct horse battery")
        #expect(hash.hasPrefix("$2b$12$"))
        #expect(try await hasher.verify("correct horse battery", against: hash))
        await hasher.shutdown()
    }

    @Test("an unknown account costs a bcrypt of the same cost as a real one (no timing shortcut)")
    func dummyHashTakesAsLong() async throws {
        let hasher = PasswordHasher(cost: 10, threadCount: 1)
        #expect(try await hasher.dummy().hasPrefix("$2b$10$"))
        // A cost-10 bcrypt takes tens of milliseconds on any machine (more under load, never less); answering
        // without one would take microseconds.
        var matched = true
        let elapsed = try await ContinuousClock().measure {
            matched = try await hasher.verify("guess", against: nil)
        }
        #expect(!matched)
        #expect(elapsed > .milliseconds(10))
        await hasher.shutdown()
    }

    @Test("hashing queued for a cancelled call is dropped, not run; a stopped hasher refuses work")
    func cancellationAndShutdown() async throws {
        let hasher = PasswordHasher(cost: 12, threadCount: 1)
        let busy = Task { try await hasher.hash("occupies the only thread") }
        try await Task.sleep(for: .milliseconds(20))
        let queued = Task { try await hasher.hash("never hashed") }
        queued.cancel()
        await #expect(throws: CancellationError.self) { try await queued.value }
        #expect(try await busy.value.hasPrefix("$2b$12$"))
        await hasher.shutdown()
        await #expect(throws: (any Error).self) { try await hasher.hash("after shutdown") }
    }

    @Test("throttle delays start after the free attempts, double, and stop at the maximum")
    func throttlePolicy() {
        let policy = ThrottlePolicy(
            freeAttempts: 5, window: .seconds(900), initialDelay: .seconds(2), maximumDelay: .seconds(60))
        #expect(policy.delay(afterAttempts: 5) == nil)
        #expect(policy.delay(afterAttempts: 6) == .seconds(2))
        #expect(policy.delay(afterAttempts: 7) == .seconds(4))
        #expect(policy.delay(afterAttempts: 10) == .seconds(32))
        #expect(policy.delay(afterAttempts: 11) == .seconds(60))
        #expect(policy.delay(afterAttempts: 500) == .seconds(60))
    }

    @Test("settings from the environment: providers, SMTP, key-encryption key; bad values are refused")
    func settingsFromEnvironment() throws {
        let key = Data(repeating: 3, count: 32).base64EncodedString()
        let (settings, warnings) = try AuthSettings.fromEnvironment(
            [
                "HABITFLOW_AUTH_KEY_ENCRYPTION_KEY": key, "HABITFLOW_SMTP_HOST": "127.0.0.1",
                "HABITFLOW_SMTP_PORT": "2525",
                "HABITFLOW_GOOGLE_CLIENT_IDS": "ios.apps.googleusercontent.com, web.apps.googleusercontent.com",
                "HABITFLOW_APPLE_CLIENT_IDS": "com.habitflow.app",
                "HABITFLOW_APPLE_JWKS_FILE": "/etc/habitflow/apple.json",
                "HABITFLOW_AUTH_KEY_ROTATION_SECONDS": "86400", "HABITFLOW_MAIL_FROM": "HabitFlow <hi@habitflow.app>",
            ], internalSecret: "secret")
        #expect(warnings.isEmpty)
        #expect(settings.keyEncryptionKey == [UInt8](repeating: 3, count: 32))
        #expect(settings.smtp?.port == 2525)
        #expect(settings.google?.clientIDs == ["ios.apps.googleusercontent.com", "web.apps.googleusercontent.com"])
        #expect(settings.google?.issuers == SocialProviderSettings.googleIssuers)
        #expect(settings.google?.keys == .url(URL(string: SocialProviderSettings.googleKeysURL)!))
        #expect(settings.apple?.keys == .file("/etc/habitflow/apple.json"))
        #expect(settings.keyRotationInterval == .seconds(86400))
        #expect(settings.mailSender == "HabitFlow <hi@habitflow.app>")
        #expect(settings.bcryptCost == 12)

        let (local, localWarnings) = try AuthSettings.fromEnvironment([:], internalSecret: "secret")
        #expect(local.smtp == nil && local.google == nil && local.apple == nil)
        #expect(localWarnings.count == 1)
        #expect(local.keyEncryptionKey.count == 32)

        #expect(throws: AuthConfigurationError.self) {
            try AuthSettings.fromEnvironment(["HABITFLOW_AUTH_KEY_ENCRYPTION_KEY": "c2hvcnQ="], internalSecret: "s")
        }
        #expect(throws: AuthConfigurationError.self) {
            try AuthSettings.fromEnvironment(
                ["HABITFLOW_SMTP_HOST": "x", "HABITFLOW_SMTP_PORT": "0"], internalSecret: "s")
        }
        #expect(throws: AuthConfigurationError.self) {
            try AuthSettings.fromEnvironment(["HABITFLOW_AUTH_KEY_ROTATION_SECONDS": "-5"], internalSecret: "s")
        }
        #expect(throws: AuthConfigurationError.self) {
            try AuthSettings.fromEnvironment(
                ["HABITFLOW_GOOGLE_CLIENT_IDS": "x", "HABITFLOW_GOOGLE_JWKS_URL": "ftp://keys"], internalSecret: "s")
        }
    }

    @Test("field rules: IANA zones only, usernames, peers")
    func fieldRules() {
        var rules = RequestValidator()
        #expect(rules.timeZone("", field: "z") == "UTC")
        _ = rules.timeZone("Europe/Berlin", field: "z")
        _ = rules.timeZone("Etc/UTC", field: "z")
        // Current IANA names that Foundation's identifier list on Linux knows only by their old names.
        _ = rules.timeZone("Asia/Kolkata", field: "z")
        _ = rules.timeZone("Europe/Kyiv", field: "z")
        #expect(rules.violations.isEmpty)
        for offset in ["GMT+2", "+02:00", "UTC+1", "Mars/Olympus"] { _ = rules.timeZone(offset, field: offset) }
        #expect(rules.violations.count == 4)
        #expect(AccountRules.isValidUsername("ana.maria_99"))
        #expect(!AccountRules.isValidUsername("ana maria"))
        #expect(!AccountRules.isValidUsername("ab"))
        #expect(AccountRules.usernameBase(fromEmail: "Ana.María+tag@example.com") == "ana.maratag")
        #expect(AccountRules.usernameBase(fromEmail: "a@example.com") == "user")
        #expect(AuthCore.host(ofPeer: "ipv4:127.0.0.1:5000") == "127.0.0.1")
        #expect(AuthCore.host(ofPeer: "ipv6:[::1]:5000") == "::1")
    }
}

extension AuthServiceTests {
    @Suite("clean-up of stale rows")
    struct MaintenanceTests {
        @Test("removes sessions ended a month ago, expired tokens and old throttle state; keeps live rows")
        func removesStaleRows() async throws {
            var configuration = PostgresPool.Configuration(connectionString: try await AuthTestDatabase.shared.url())
            configuration.maximumConnections = 2
            let pool = PostgresPool(configuration: configuration, logger: testLogger)
            try await PostgresMigrations.migrate(
                service: "auth", pool: pool, directory: TestEnvironment.sqlRoot + "/auth", logger: testLogger)
            var settings = AuthSettings(keyEncryptionKey: testKeyEncryptionKey)
            settings.maintenanceInterval = .seconds(3600)
            let now = Date()
            let old = now.addingTimeInterval(-40 * 24 * 3600)
            let userID = UUID()
            let staleSession = UUID()
            let liveSession = UUID()
            try await pool.transaction { tx in
                try await tx.execute(
                    """
                    INSERT INTO users (id, email, username, display_name, created_at, updated_at) \
                    VALUES (\(userID), \("clean-\(userID)@example.com"), \("clean_\(userID.uuidString.prefix(8))"), \
                    'x', \(old), \(old))
                    """)
                for (id, revoked) in [(staleSession, old as Date?), (liveSession, nil)] {
                    try await tx.execute(
                        """
                        INSERT INTO sessions \
                        (id, user_id, created_at, last_used_at, expires_at, revoked_at, revoke_reason) \
                        VALUES (\(id), \(userID), \(old), \(old), \(now.addingTimeInterval(3600)), \
                        \(revoked as Date?), \((revoked == nil ? nil : "logout") as String?))
                        """)
                }
                try await tx.execute(
                    """
                    INSERT INTO one_time_tokens (token_hash, user_id, purpose, created_at, expires_at) \
                    VALUES (\(Data(SecureRandom.bytes(32))), \(userID), 'password_reset', \(old), \
                    \(old.addingTimeInterval(3600)))
                    """)
                try await tx.execute(
                    """
                    INSERT INTO throttle_state (scope, subject_hash, failures, window_started_at) \
                    VALUES ('login_address', \(Data(SecureRandom.bytes(32))), 3, \(old))
                    """)
            }
            try await Maintenance(store: AuthStore(pool: pool), settings: settings, logger: testLogger)
                .removeStaleRows()
            let sessions = try await pool.query("SELECT id FROM sessions WHERE user_id = \(userID)").map {
                try $0.decode(0, as: UUID.self)
            }
            #expect(sessions == [liveSession])
            #expect(
                try await pool.queryRow("SELECT count(*) FROM one_time_tokens WHERE user_id = \(userID)")?.decode(
                    0, as: Int.self) == 0)
            #expect(
                try await pool.queryRow("SELECT count(*) FROM throttle_state WHERE window_started_at = \(old)")?.decode(
                    0, as: Int.self) == 0)
            try await pool.execute("DELETE FROM users WHERE id = \(userID)")
            await pool.shutdown()
        }
    }
}
