import HabitFlowHabits
import HabitFlowServiceKit

await ServiceMain.run(HabitsServiceDefinition.make())
