public import HabitFlowCalendar
internal import HabitFlowGoalsProtos
internal import HabitFlowHabitsProtos
internal import HabitFlowOutbox
internal import HabitFlowSocialProtos
public import HabitFlowServiceKit

/// The goals service: goals of every type and horizon, their links to habits, assessments, and the progress derived
/// from habits' entries (DESIGN.md sections 3 and 3a).
///
/// Serves `GoalsService` (public, through the gateway), `GoalsInternal` (other services) and `EventSubscriber`
/// (auth's account events, habits' category and habit deletions, social's partnership starts and ends); calls
/// `HabitsInternal` for entry totals, habit details and unit holds, and `SocialInternal/GetPartnership` when a goal
/// is shared. Publishes nothing yet. `ChangeNotices` tells the gateway's watchers whose data changed.
public enum GoalsServiceDefinition {
    /// - Parameter clock: where "now" comes from; tests pass their own.
    public static func make(clock: UserClock = .system) -> ServiceDefinition {
        ServiceDefinition(name: "goals", descriptorSets: [HabitFlowGoalsProtosDescriptorSet.base64], eventRoutes: [:])
        { runtime in
            let store = GoalsStore(pool: runtime.pool)
            let habits = HabitsSource(client: Habitflow_Habits_V1_HabitsInternal.Client(
                transport: try runtime.channel(to: "habits")))
            let partners = PartnerSource(client: Habitflow_Social_V1_SocialInternal.Client(
                transport: try runtime.channel(to: "social")))
            let reader = GoalProgressReader(store: store, habits: habits, clock: clock)
            let events = GoalsEvents(store: store, clock: clock, logger: runtime.logger)
            return [
                GoalsServiceHandler(store: store, reader: reader, partners: partners),
                GoalsInternalHandler(store: store, reader: reader),
                EventSubscriberService(pool: runtime.pool, consumer: GoalsEvents.consumer, apply: events.apply),
                ChangeNoticesService(runtime: runtime),
            ]
        }
    }
}
