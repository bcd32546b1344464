import HabitFlowServiceKit
import HabitFlowTestSupport
import Testing

@Suite("Service host background work")
struct BackgroundWorkTests {
    @Test("work started with runInBackground runs until shutdown cancels it; shutdown hooks run after it stopped")
    func backgroundWorkStopsAtShutdown() async throws {
        let log = Shared<[String]>([])
        let definition = ServiceDefinition(name: "background") { runtime in
            runtime.runInBackground {
                log.update { $0.append("started") }
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
                log.update { $0.append("cancelled") }
            }
            runtime.onShutdown { log.update { $0.append("hook") } }
            return []
        }
        let host = try await startHost(definition)
        #expect(try await eventually { log.value == ["started"] })
        await host.shutdown()
        #expect(log.value == ["started", "cancelled", "hook"])
    }
}
