import HabitFlowAuth
import HabitFlowServiceKit

await ServiceMain.run(AuthServiceDefinition.make())
