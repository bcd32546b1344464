import HabitFlowLoad
import HabitFlowRPC
import Testing

/// The engine's pacing, bounds and bookkeeping, on a scenario without a network.
@Suite struct EngineTests {
    @Test func openLoopSendsOnTheFixedScheduleAndSkipsTheWarmUp() async throws {
        let scenario = FakeScenario()
        let plan = LoadPlan.test(.openLoop(ratePerSecond: 200), users: 10, duration: .seconds(1), warmUp: .milliseconds(500))
        // The schedule starts after this instant (the fake scenario connects and prepares users at once).
        let before = ContinuousClock.now
        let measurement = try await LoadEngine(scenario: scenario, plan: plan).run()

        // 0.5 s of warm-up is 100 requests, then 200 measured: exactly the schedule, whatever the machine does.
        #expect(measurement.total.succeeded == 200)
        #expect(measurement.total.failed == 0)
        let sends = scenario.snapshot.sendTimes.sorted()
        #expect(sends.count == 300)
        // Never ahead of the schedule: request k goes no earlier than k / rate after the start. (A late one goes as
        // soon as it can, so there is no upper bound on a busy machine.)
        for (index, send) in sends.enumerated() {
            #expect(send - before >= .milliseconds(5 * index), "request \(index) was sent early")
        }
        let last = try #require(sends.last)
        #expect(last - before >= .milliseconds(1495))
        // The achieved rate is at most the target (less when a busy machine wakes the sender late).
        #expect(measurement.ratePerSecond(of: measurement.total) > 0)
        #expect(measurement.ratePerSecond(of: measurement.total) <= 200.5)
        #expect(measurement.operations.map(\.name) == ["read", "write"])
        #expect(measurement.operations.map(\.requests).reduce(0, +) == 200)
    }

    @Test func openLoopCountsAStallFromTheIntendedSendTimes() async throws {
        // One user, one stream: the 100th request stalls for a second, so the ~100 requests meant to go during the
        // stall wait. Their latency counts from their intended send time: the tail shows the stall.
        let stalling: @Sendable (Int) -> FakeScenario.Behaviour = { call in
            .succeed(after: call == 100 ? .seconds(1) : .milliseconds(2))
        }
        let open = try await LoadEngine(
            scenario: FakeScenario(behaviour: stalling),
            plan: .test(.openLoop(ratePerSecond: 100), streams: 1, duration: .seconds(3))
        ).run()
        let latency = open.total.latency
        #expect(latency.count == 300)
        #expect(latency.p90 >= .milliseconds(400), "corrected p90 \(latency.p90)")
        #expect(latency.p99 >= .milliseconds(800), "corrected p99 \(latency.p99)")
        #expect(latency.max >= .milliseconds(990))
        // Measured from the actual send, only the stalled request itself is slow: the omission wrk2 corrects.
        let service = open.total.serviceTime
        #expect(service.p90 < .milliseconds(200), "service time p90 \(service.p90)")
        #expect(service.max >= .milliseconds(990))

        // The same stall in a closed loop: the user simply waits, and only one sample is slow.
        let closed = try await LoadEngine(
            scenario: FakeScenario(behaviour: stalling), plan: .test(.closedLoop, streams: 1, duration: .seconds(2))
        ).run()
        #expect(closed.total.latency.p90 < .milliseconds(200), "closed-loop p90 \(closed.total.latency.p90)")
        #expect(closed.total.latency.max >= .milliseconds(990))
    }

    @Test func closedLoopStopsAtTheRequestCount() async throws {
        let scenario = FakeScenario()
        let measurement = try await LoadEngine(
            scenario: scenario, plan: .test(.closedLoop, users: 4, requests: 500, warmUp: .milliseconds(200))
        ).run()
        #expect(measurement.total.requests == 500)
        #expect(scenario.snapshot.calls > 500, "the warm-up's requests are sent but not counted")
        // Every user comes back for finish(users:), and every connection is closed.
        #expect(scenario.snapshot.finishedUsers.sorted() == [0, 1, 2, 3])
        #expect(scenario.snapshot.closedConnections == 1)
    }

    @Test func failuresAreCountedByStatusCode() async throws {
        let scenario = FakeScenario { call in
            if call % 5 == 0 { return .fail(RPCError(.unavailable, "the service is restarting")) }
            if call % 7 == 0 { return .fail(ResponseCheckFailure("the week view has 6 days")) }
            return .succeed(after: .zero)
        }
        let measurement = try await LoadEngine(scenario: scenario, plan: .test(.closedLoop, users: 3, requests: 700)).run()
        let total = measurement.total
        #expect(total.failures == ["UNAVAILABLE": 140, "CLIENT_CHECK": 80])
        #expect(total.failureExamples["UNAVAILABLE"] == "the service is restarting")
        #expect(total.succeeded == 480)
        #expect(measurement.operations.map(\.failed).reduce(0, +) == 220)
    }

    @Test func streamsPerConnectionBoundRequestsInFlight() async throws {
        let scenario = FakeScenario { _ in .succeed(after: .milliseconds(5)) }
        _ = try await LoadEngine(
            scenario: scenario, plan: .test(.closedLoop, users: 12, connections: 3, streams: 2, duration: .milliseconds(600))
        ).run()
        let perConnection = scenario.snapshot.maxInFlightPerConnection
        #expect(perConnection.keys.sorted() == [0, 1, 2])
        #expect(perConnection.values.allSatisfy { $0 <= 2 }, "\(perConnection)")
        #expect(scenario.snapshot.maxInFlight > 2, "requests ran concurrently over the connections")
    }

    @Test func aConnectionThatCannotOpenStopsTheRunAndClosesTheOthers() async throws {
        let scenario = FakeScenario(failingConnection: 2)
        await #expect {
            _ = try await LoadEngine(scenario: scenario, plan: .test(connections: 4, duration: .seconds(1))).run()
        } throws: { error in
            guard case LoadFailure.connect(let index, _) = error else { return false }
            return index == 2
        }
        #expect(scenario.snapshot.closedConnections == 3)
        #expect(scenario.snapshot.calls == 0)
    }

    @Test func aStopEndsTheRunEarlyWithWhatWasMeasured() async throws {
        let scenario = FakeScenario { _ in .succeed(after: .milliseconds(2)) }
        let stopper = LoadStopper()
        let engine = LoadEngine(
            scenario: scenario, plan: .test(.openLoop(ratePerSecond: 100), users: 2, duration: .seconds(60)),
            stopper: stopper)
        let run = Task { try await engine.run() }
        let deadline = ContinuousClock.now + .seconds(20)
        while scenario.snapshot.calls < 20, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        stopper.stop()
        let measurement = try await run.value
        #expect(measurement.stoppedEarly)
        // Stopped a minute early: what was sent by then is counted, nothing more.
        #expect(measurement.total.requests >= 20 && measurement.total.requests < 3000)
        #expect(measurement.total.requests == scenario.snapshot.calls)
    }

    @Test func planAndMixMistakesAreReportedBeforeConnecting() async throws {
        let scenario = FakeScenario()
        await #expect {
            _ = try await LoadEngine(scenario: scenario, plan: .test(users: 0, duration: .seconds(1))).run()
        } throws: { error in
            "\(error)" == "--users must be at least 1"
        }
        let unknown = try OperationMix(parsing: "read=1,dance=2")
        await #expect {
            _ = try await LoadEngine(scenario: scenario, plan: .test(duration: .seconds(1), mix: unknown)).run()
        } throws: { error in
            "\(error)" == "scenario 'fake' has no operation 'dance'; it has: read, write"
        }
        #expect(scenario.snapshot.closedConnections == 0)
    }
}
