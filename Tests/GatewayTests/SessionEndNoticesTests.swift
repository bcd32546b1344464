import Foundation
import HabitFlowAuthProtos
import HabitFlowGateway
import HabitFlowHabitsProtos
import HabitFlowPostgres
import HabitFlowRPC
import HabitFlowRPCClient
import HabitFlowServiceKit
import HabitFlowStackTestSupport
import HabitFlowTestSupport
import Testing

/// Auth pushes session ends to the gateway (`ChangeNotices` on auth, from a trigger on `sessions`), so the gateway
/// trusts its cached session checks for minutes while the push is live, and for the short interval whenever it is not:
/// a revoked session is refused within two seconds either way.
@Suite struct SessionEndNoticesTests {
    typealias Clients = GatewayStackTests.Clients

    /// A stack whose gateway would trust an answer for ten minutes while the push is live.
    static func start(grace: Duration = .seconds(30)) async throws -> TestStack {
        try await TestStack.start { gateway in
            gateway.sessionCheckInterval = .seconds(2)
            gateway.pushedSessionCheckInterval = .seconds(600)
            gateway.sessionCheckGrace = grace
        }
    }

    /// `AuthInternal/CheckSession` calls `auth` has answered.
    static func checks(_ auth: ServiceHost) -> Int {
        auth.runtime.metrics.emitToString().split(separator: "\n")
            .filter { $0.hasPrefix("habitflow_rpc_server_handled_total") && $0.contains("method=\"CheckSession\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
            .reduce(0, +)
    }

    /// Whether a call more than the short interval after the previous one is admitted without asking auth.
    static func trustedBeyondShortInterval(_ clients: Clients, _ options: CallOptions, auth: ServiceHost) async throws -> Bool {
        _ = try await clients.habits.listHabits(.init(), options: options)
        try await Task.sleep(for: .milliseconds(2_300))
        let before = checks(auth)
        _ = try await clients.habits.listHabits(.init(), options: options)
        try await Task.sleep(for: .milliseconds(100))
        return checks(auth) == before
    }

    /// Waits until the gateway is subscribed (it subscribes as it starts, so this is quick).
    static func pushIsLive(_ clients: Clients, _ options: CallOptions, auth: ServiceHost) async throws -> Bool {
        try await eventually(timeout: .seconds(10)) {
            try await trustedBeyondShortInterval(clients, options, auth: auth)
        }
    }

    /// Whether calls with `options` are refused `UNAUTHENTICATED` within `limit`.
    static func refused(within limit: Duration, _ clients: Clients, _ options: CallOptions) async throws -> Bool {
        try await eventually(timeout: limit) {
            do {
                _ = try await clients.habits.listHabits(.init(), options: options)
                return false
            } catch let error as RPCError {
                return error.code == .unauthenticated
            }
        }
    }

    static func login(
        _ clients: Clients, _ account: TestAccount, device: String
    ) async throws -> (options: CallOptions, sessionID: String) {
        let response = try await clients.auth.login(
            .with {
                $0.email = account.email
                $0.password = account.password
                $0.device.deviceName = device
            })
        return (GatewayStackTests.bearer(response.tokens.accessToken), response.tokens.sessionID)
    }

    @Test func logoutLogoutEverywhereAndDeletionAreRefusedWithinTwoSecondsDespiteTheLongTrust() async throws {
        let stack = try await Self.start()
        let clients = Clients(channel: try stack.gatewayChannel())
        let (account, registered) = try await GatewayStackTests.register(clients, device: "phone")
        let phone = GatewayStackTests.bearer(registered.tokens.accessToken)
        let laptop = try await Self.login(clients, account, device: "laptop").options
        let tablet = try await Self.login(clients, account, device: "tablet").options

        // The push is live: a call 2.3 s after the last one does not ask auth.
        #expect(try await Self.pushIsLive(clients, phone, auth: stack.auth))
        _ = try await clients.habits.listHabits(.init(), options: tablet)

        _ = try await clients.auth.logout(.init(), options: phone)
        #expect(try await Self.refused(within: .seconds(2), clients, phone))

        _ = try await clients.auth.logoutEverywhere(.with { $0.keepCurrentSession = true }, options: laptop)
        #expect(try await Self.refused(within: .seconds(2), clients, tablet))
        _ = try await clients.habits.listHabits(.init(), options: laptop)

        _ = try await clients.auth.deleteAccount(.with { $0.password = account.password }, options: laptop)
        #expect(try await Self.refused(within: .seconds(2), clients, laptop))

        await clients.channel.close()
        await stack.stop()
    }

    /// The figure behind the change: one user's calls 2.1 s apart cost auth a `CheckSession` each without the push,
    /// and one in all with it.
    @Test func repeatedCallsOfOneUserAskAuthOnceWhileThePushIsLive() async throws {
        func checksForCalls(pushed: Duration) async throws -> Int {
            let stack = try await TestStack.start { gateway in gateway.pushedSessionCheckInterval = pushed }
            let clients = Clients(channel: try stack.gatewayChannel())
            let (_, registered) = try await GatewayStackTests.register(clients)
            let options = GatewayStackTests.bearer(registered.tokens.accessToken)
            // The gateway subscribed as it started; a moment for the stream's first message.
            try await Task.sleep(for: .milliseconds(300))
            let before = Self.checks(stack.auth)
            for call in 0..<5 {
                if call > 0 { try await Task.sleep(for: .milliseconds(2_100)) }
                _ = try await clients.habits.listHabits(.init(), options: options)
            }
            try await Task.sleep(for: .milliseconds(100))
            let checks = Self.checks(stack.auth) - before
            await clients.channel.close()
            await stack.stop()
            return checks
        }
        async let withPush = checksForCalls(pushed: .seconds(300))
        async let withoutPush = checksForCalls(pushed: .seconds(2))
        let (pushed, unpushed) = try await (withPush, withoutPush)
        print("CheckSession calls for 5 calls of one user 2.1 s apart: \(unpushed) re-checking every 2 s, \(pushed) with the push")
        #expect(unpushed == 5)
        #expect(pushed == 1)
    }

    @Test func whileAuthIsAwayChecksFallBackToTheShortIntervalAndAMissedRevocationIsRefusedAfterTheReconnect()
        async throws
    {
        // A grace shorter than the phone's last check is old, so that a call admitted without asking shows.
        let stack = try await Self.start(grace: .seconds(1))
        let clients = Clients(channel: try stack.gatewayChannel())
        let (account, registered) = try await GatewayStackTests.register(clients, device: "phone")
        let phone = GatewayStackTests.bearer(registered.tokens.accessToken)
        let laptop = try await Self.login(clients, account, device: "laptop").options
        let (tablet, tabletSessionID) = try await Self.login(clients, account, device: "tablet")
        #expect(try await Self.pushIsLive(clients, phone, auth: stack.auth))
        _ = try await clients.habits.listHabits(.init(), options: tablet)

        // Auth goes away and its notice stream ends: the phone's answer, 2.4 s old, no longer holds, and auth cannot
        // be asked.
        let port = stack.auth.port
        await stack.auth.shutdown()
        #expect(
            try await eventually(timeout: .seconds(2)) {
                do {
                    _ = try await clients.habits.listHabits(.init(), options: phone)
                    return false
                } catch let error as RPCError {
                    return error.code == .unavailable
                }
            })
        // The phone's and the tablet's sessions are revoked meanwhile: their notices are lost.
        try await AuthDatabase.revokeSession(registered.tokens.sessionID)
        try await AuthDatabase.revokeSession(tabletSessionID)
        let auth = try await TestStack.startAuth(port: port, logger: stack.logger)
        // The gateway reaches auth again (ListSessions is served by auth itself).
        #expect(
            try await eventually(timeout: .seconds(15)) {
                (try? await clients.auth.listSessions(.init(), options: laptop)) != nil
            })
        // The phone's answer from before the outage is no longer trusted.
        #expect(try await Self.refused(within: .seconds(2), clients, phone))
        // Subscribed again: answers are trusted for long again, but not the tablet's from the previous stream.
        #expect(try await Self.pushIsLive(clients, laptop, auth: auth))
        #expect(try await Self.refused(within: .seconds(2), clients, tablet))

        await clients.channel.close()
        await stack.gateway.shutdown()
        await auth.shutdown()
        await stack.goals.shutdown()
        await stack.social.shutdown()
        for host in stack.habits { await host.shutdown() }
    }
}

/// Auth's tables, written behind its back (as another replica would while this one is away).
enum AuthDatabase {
    static func revokeSession(_ id: String) async throws {
        let pool = PostgresPool(
            configuration: .init(connectionString: try TestEnvironment.serviceURL("auth")), logger: .init(label: "admin"))
        do {
            let updated = try await pool.execute(
                "UPDATE sessions SET revoked_at = now(), revoke_reason = 'revoked' WHERE id = \(UUID(uuidString: id)!)")
            #expect(updated == 1)
            await pool.shutdown()
        } catch {
            await pool.shutdown()
            throw error
        }
    }
}
