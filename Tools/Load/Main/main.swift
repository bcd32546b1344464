// habitflow-load: the load-test driver (see `habitflow-load --help` and README "Load testing").
import HabitFlowLoad

await LoadCLI.main()
