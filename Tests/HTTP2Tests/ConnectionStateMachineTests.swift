import HabitFlowHTTP2
import NIOCore
import Testing

/// The connection lifecycle without a socket: each test feeds events and times, and checks the actions and phases.
@Suite("A connection's lifecycle (ConnectionStateMachine)")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(seconds: Int64) -> NIODeadline { start + .seconds(seconds) }

    static func server(
        idle: TimeAmount? = nil, maxAge: TimeAmount? = nil, grace: TimeAmount = .seconds(10),
        keepalive: Machine.Keepalive? = nil, pingPolicy: Machine.PingPolicy? = nil, headerTimeout: TimeAmount? = nil
    ) -> Machine {
        Machine(
            role: .server,
            configuration: .init(
                headerTimeout: headerTimeout, idleTimeout: idle, maxAge: maxAge, gracePeriod: grace,
                keepalive: keepalive, pingPolicy: pingPolicy),
            now: start)
    }

    static func client(keepalive: Machine.Keepalive? = nil) -> Machine {
        Machine(role: .client, configuration: .init(keepalive: keepalive), now: start)
    }

    // MARK: Server: graceful shutdown

    @Test("a graceful shutdown sends the notice, the final GOAWAY one round trip later, and closes with the last call")
    func gracefulShutdownWaitsForTheRoundTripAndTheCalls() {
        var machine = Self.server()
        machine.streamOpened()
        let result1 = machine.beginGracefulShutdown(now: Self.at(seconds: 1))
        #expect(result1 == [
                .sendShutdownNotice, .schedule(.finalGoaway, at: Self.at(seconds: 2)), .flush,
            ])
        #expect(machine.phase == .shutdownNoticeSent)
        #expect(!machine.takesNewStreams)
        let result2 = machine.beginGracefulShutdown(now: Self.at(seconds: 1))
        #expect(result2.isEmpty, "asking twice does nothing more")

        // The notice's PING comes back: the final GOAWAY at once, and the grace period starts.
        let result3 = machine.pingAcknowledged(now: Self.at(seconds: 1))
        #expect(result3 == [
                .cancel(.finalGoaway), .sendGoaway(.noError, debugData: ""),
                .schedule(.grace, at: Self.at(seconds: 11)), .flush,
            ])
        #expect(machine.phase == .draining)
        let result4 = machine.timerFired(.finalGoaway, now: Self.at(seconds: 2))
        #expect(result4.isEmpty, "a late fallback sends nothing")

        let result5 = machine.streamClosed(now: Self.at(seconds: 3))
        #expect(result5 == .flush)
        #expect(machine.phase == .closed, "the last call ended: the flush closes")
    }

    @Test("without an answer to the notice's PING the final GOAWAY goes after a second; no calls means closed")
    func finalGoawayFallback() {
        var machine = Self.server()
        _ = machine.beginGracefulShutdown(now: Self.start)
        let result6 = machine.timerFired(.finalGoaway, now: Self.at(seconds: 1))
        #expect(result6 == [.sendGoaway(.noError, debugData: ""), .flush])
        #expect(machine.phase == .closed)
    }

    @Test("calls still open when the grace period ends are cancelled, and the connection closes")
    func gracePeriodCancelsTheRest() {
        var machine = Self.server(grace: .seconds(5))
        machine.streamOpened()
        machine.streamOpened()
        _ = machine.beginGracefulShutdown(now: Self.start)
        _ = machine.timerFired(.finalGoaway, now: Self.at(seconds: 1))
        let result7 = machine.streamClosed(now: Self.at(seconds: 2))
        #expect(result7 == nil, "one call is still running")
        let result8 = machine.timerFired(.grace, now: Self.at(seconds: 6))
        #expect(result8 == [.cancelAllStreams, .closeAfterFlushing])
        #expect(machine.phase == .closed)
        #expect(machine.openStreams == 0)
    }

    // MARK: Server: idle and age

    @Test("the session's idle memory goes back once nothing was written for the delay, with one timer per quiet spell")
    func idleMemoryRelease() {
        var machine = Machine(
            role: .server, configuration: .init(memoryReleaseDelay: .seconds(5)), now: Self.start)
        #expect(machine.start(now: Self.start).isEmpty)
        #expect(machine.wrote(now: Self.start) == .schedule(.memoryRelease, at: Self.at(seconds: 5)))
        // Writes while the timer runs start no other timer; it counts from the last one when it fires.
        #expect(machine.wrote(now: Self.at(seconds: 2)) == nil)
        #expect(machine.timerFired(.memoryRelease, now: Self.at(seconds: 5)) == [
            .schedule(.memoryRelease, at: Self.at(seconds: 7))
        ])
        #expect(machine.timerFired(.memoryRelease, now: Self.at(seconds: 7)) == [.releaseIdleMemory])
        // Released: nothing more until the next write, which starts the timer again.
        #expect(machine.timerFired(.memoryRelease, now: Self.at(seconds: 12)).isEmpty)
        // Timers fire on whole seconds (the start is one), so many connections' timers wake the loop once.
        #expect(
            machine.wrote(now: Self.at(seconds: 30) + .milliseconds(300))
                == .schedule(.memoryRelease, at: Self.at(seconds: 36)))
        machine.close()
        #expect(machine.timerFired(.memoryRelease, now: Self.at(seconds: 35)).isEmpty)

        var withoutRelease = Self.server()
        #expect(withoutRelease.wrote(now: Self.start) == nil)
    }

    @Test("the idle timer counts from the last call's end and shuts down only a connection without calls")
    func idleTimeout() {
        var machine = Self.server(idle: .seconds(60))
        let result9 = machine.start(now: Self.start)
        #expect(result9 == [.schedule(.idle, at: Self.at(seconds: 60))])

        machine.streamOpened()
        let result10 = machine.timerFired(.idle, now: Self.at(seconds: 60))
        #expect(result10 == [.schedule(.idle, at: Self.at(seconds: 120))])
        let result11 = machine.streamClosed(now: Self.at(seconds: 100))
        #expect(result11 == nil)
        // Idle for 20 s when it fires at 120: it waits for the remaining 40.
        let result12 = machine.timerFired(.idle, now: Self.at(seconds: 120))
        #expect(result12 == [.schedule(.idle, at: Self.at(seconds: 160))])
        let result13 = machine.timerFired(.idle, now: Self.at(seconds: 160))
        #expect(result13.first == .sendShutdownNotice)
        #expect(machine.phase == .shutdownNoticeSent)
    }

    @Test("a connection at its maximum age shuts down gracefully, calls or not")
    func maximumAge() {
        var machine = Self.server(maxAge: .seconds(300))
        let result14 = machine.start(now: Self.start)
        #expect(result14 == [.schedule(.age, at: Self.at(seconds: 300))])
        machine.streamOpened()
        let result15 = machine.timerFired(.age, now: Self.at(seconds: 300))
        #expect(result15.first == .sendShutdownNotice)
    }

    // MARK: Keepalive

    static let keepalive = Machine.Keepalive(interval: .seconds(10), timeout: .seconds(2), withoutCalls: true)

    @Test("a PING goes out only after an interval without reads; an unanswered one closes the connection")
    func keepalivePings() {
        var machine = Self.server(keepalive: Self.keepalive)
        let result16 = machine.start(now: Self.start)
        #expect(result16 == [.schedule(.keepalive, at: Self.at(seconds: 10))])
        _ = machine.received(ByteBuffer(), now: Self.at(seconds: 5))
        let result17 = machine.timerFired(.keepalive, now: Self.at(seconds: 10))
        #expect(result17 == [.schedule(.keepalive, at: Self.at(seconds: 20))],
            "something was read 5 s ago: no ping")

        let payload = Machine.serverKeepalivePingPayload
        let result18 = machine.timerFired(.keepalive, now: Self.at(seconds: 20))
        #expect(result18 == [
                .sendPing(payload: payload), .schedule(.keepaliveTimeout, at: Self.at(seconds: 22)), .flush,
                .schedule(.keepalive, at: Self.at(seconds: 30)),
            ])
        let result19 = machine.pingAcknowledged(now: Self.at(seconds: 21))
        #expect(result19 == [.cancel(.keepaliveTimeout)])
        #expect(machine.phase == .active)

        _ = machine.timerFired(.keepalive, now: Self.at(seconds: 40))
        let result20 = machine.timerFired(.keepalive, now: Self.at(seconds: 41))
        #expect(result20 == [.schedule(.keepalive, at: Self.at(seconds: 51))],
            "one ping outstanding at a time")
        let result21 = machine.timerFired(.keepaliveTimeout, now: Self.at(seconds: 42))
        #expect(result21 == [.closeNow])
        #expect(machine.phase == .closed)
    }

    @Test("a client pings an idle connection only when allowed, at the interval it is given")
    func clientKeepalive() {
        var machine = Self.client(
            keepalive: .init(interval: .seconds(10), timeout: .seconds(2), withoutCalls: false))
        let result22 = machine.settingsReceived()
        #expect(result22)
        let result23 = machine.keepaliveTimerFired(now: Self.at(seconds: 10), interval: .seconds(10))
        #expect(result23 == [
                .schedule(.keepalive, at: Self.at(seconds: 20))
            ], "no calls: no ping")
        machine.streamOpened()
        let result24 = machine.keepaliveTimerFired(now: Self.at(seconds: 40), interval: .seconds(20))
        #expect(result24 == [
                .sendPing(payload: Machine.clientKeepalivePingPayload),
                .schedule(.keepaliveTimeout, at: Self.at(seconds: 42)), .flush,
                .schedule(.keepalive, at: Self.at(seconds: 60)),
            ], "a doubled interval (after too_many_pings) is used for the next ping")
    }

    // MARK: Ping strikes

    @Test("pings closer together than allowed are strikes; one over the limit ends the connection")
    func pingStrikes() {
        var machine = Self.server(
            pingPolicy: .init(minIntervalWithCalls: .seconds(60), permitWithoutCalls: false, maxStrikes: 2))
        machine.streamOpened()
        let result25 = machine.pingReceived(now: Self.at(seconds: 0))
        #expect(result25.isEmpty)
        let result26 = machine.pingReceived(now: Self.at(seconds: 1))
        #expect(result26.isEmpty, "strike 1")
        let result27 = machine.pingReceived(now: Self.at(seconds: 2))
        #expect(result27.isEmpty, "strike 2")
        machine.streamFrameSent()
        let result28 = machine.pingReceived(now: Self.at(seconds: 3))
        #expect(result28.isEmpty, "sending DATA or HEADERS forgave the strikes")
        let result29 = machine.pingReceived(now: Self.at(seconds: 4))
        #expect(result29.isEmpty)
        let result30 = machine.pingReceived(now: Self.at(seconds: 5))
        #expect(result30.isEmpty)
        let result31 = machine.pingReceived(now: Self.at(seconds: 6))
        #expect(result31 == [
                .sendGoaway(.enhanceYourCalm, debugData: "too_many_pings"), .closeAfterFlushing,
            ])
        #expect(machine.phase == .closed)
    }

    @Test("without calls, pings within two hours are strikes unless the policy permits them")
    func pingsWithoutCalls() {
        var strict = Self.server(
            pingPolicy: .init(minIntervalWithCalls: .seconds(60), permitWithoutCalls: false, maxStrikes: 0))
        let result32 = strict.pingReceived(now: Self.at(seconds: 0))
        #expect(result32.isEmpty)
        let hourLater = strict.pingReceived(now: Self.at(seconds: 3600))
        #expect(!hourLater.isEmpty, "an hour apart is still too often")

        var lenient = Self.server(
            pingPolicy: .init(minIntervalWithCalls: .seconds(60), permitWithoutCalls: true, maxStrikes: 0))
        let result33 = lenient.pingReceived(now: Self.at(seconds: 0))
        #expect(result33.isEmpty)
        let result34 = lenient.pingReceived(now: Self.at(seconds: 60))
        #expect(result34.isEmpty)
    }

    // MARK: Header timeout

    @Test("a preface not complete within the header timeout gets GOAWAY ENHANCE_YOUR_CALM header_timeout")
    func headerTimeout() {
        var machine = Self.server(headerTimeout: .seconds(10))
        let result35 = machine.start(now: Self.start)
        #expect(result35 == [.schedule(.header, at: Self.at(seconds: 10))])
        let result36 = machine.received(ByteBuffer(bytes: Array("PRI * HTTP/2.0".utf8)), now: Self.at(seconds: 9))
        #expect(result36 == nil,
            "the timer that runs already covers it")
        let result37 = machine.timerFired(.header, now: Self.at(seconds: 10))
        #expect(result37 == [
                .sendGoaway(.enhanceYourCalm, debugData: "header_timeout"), .closeAfterFlushing,
            ])
        #expect(machine.phase == .closed)
    }

    @Test("a header block begun later re-arms the header timer from its own start")
    func headerTimerFollowsHeaderBlocks() throws {
        var machine = Self.server(headerTimeout: .seconds(10))
        _ = machine.start(now: Self.start)
        let (preface, request) = try InboundHeaderProgressTests.clientBytes()
        let result38 = machine.received(ByteBuffer(bytes: preface), now: Self.at(seconds: 1))
        #expect(result38 == nil)
        let result39 = machine.timerFired(.header, now: Self.at(seconds: 10))
        #expect(result39.isEmpty, "the preface completed in time")
        // Half a HEADERS frame at 20 s: due at 30 s.
        let result40 = machine.received(ByteBuffer(bytes: request.prefix(20)), now: Self.at(seconds: 20))
        #expect(result40
                == .schedule(.header, at: Self.at(seconds: 30)))
        let result41 = machine.received(ByteBuffer(bytes: request.dropFirst(20)), now: Self.at(seconds: 21))
        #expect(result41 == nil)
        let result42 = machine.timerFired(.header, now: Self.at(seconds: 30))
        #expect(result42.isEmpty)
        #expect(machine.phase == .active)
    }

    // MARK: Client

    @Test("a client takes calls from the server's first SETTINGS, and drains after its GOAWAY")
    func clientReadinessAndGoaway() {
        var machine = Self.client()
        #expect(machine.phase == .starting)
        #expect(!machine.takesNewStreams)
        let result43 = machine.settingsReceived()
        #expect(result43)
        let again = machine.settingsReceived()
        #expect(!again, "ready once")
        #expect(machine.takesNewStreams)

        machine.streamOpened()
        let result44 = machine.goawayReceived()
        #expect(result44 == nil, "a call is still running")
        #expect(!machine.takesNewStreams)
        #expect(machine.phase == .draining)
        let result45 = machine.streamClosed(now: Self.at(seconds: 1))
        #expect(result45 == .flush)
        #expect(machine.phase == .closed)
    }

    @Test("a client's GOAWAY does not drain a server; its calls go on")
    func serverIgnoresClientGoaway() {
        var machine = Self.server()
        machine.streamOpened()
        let result46 = machine.goawayReceived()
        #expect(result46 == nil)
        #expect(machine.phase == .active)
    }
}
