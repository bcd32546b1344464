import HabitFlowGoals
import HabitFlowServiceKit

await ServiceMain.run(GoalsServiceDefinition.make())
