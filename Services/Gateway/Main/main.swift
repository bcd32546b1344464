import HabitFlowGateway
import HabitFlowServiceKit

await ServiceMain.run(service: "gateway") { service, logger in
    try await Gateway.start(configuration: try GatewayConfiguration.fromEnvironment(service), logger: logger)
}
