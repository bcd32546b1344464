import HabitFlowServiceKit
import HabitFlowSocial

await ServiceMain.run(SocialServiceDefinition.make())
