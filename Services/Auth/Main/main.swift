import HabitFlowAuth
import HabitFlowServiceKit

await ServiceMain.run(AuthService.definition())
