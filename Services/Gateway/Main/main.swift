import HabitFlowGateway
import HabitFlowServiceKit

await ServiceMain.run(GatewayServiceDefinition.make())
