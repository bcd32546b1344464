public import HabitFlowCalendar
internal import HabitFlowEvents
internal import HabitFlowHabitsProtos
internal import HabitFlowOutbox
public import HabitFlowServiceKit

/// The habits service: categories, habits, entries, weekly progress and scores (DESIGN.md section 3).
///
/// Serves `HabitsService` (public, through the gateway), `HabitsInternal` (other services) and `EventSubscriber`
/// (auth's account events); publishes `CategoryDeleted` and `HabitDeleted` through its outbox, to goals.
/// `ChangeNotices` tells the gateway's watchers whose data changed.
public enum HabitsServiceDefinition {
    /// - Parameters:
    ///   - clock: where "now" comes from; tests pass their own.
    ///   - weekViews: the host's week view cache (tests pass one to look at it).
    public static func make(clock: UserClock = .system, weekViews: WeekViewCache = WeekViewCache()) -> ServiceDefinition {
        ServiceDefinition(
            name: "habits",
            descriptorSets: [HabitFlowHabitsProtosDescriptorSet.base64],
            eventRoutes: [
                Habitflow_Events_V1_CategoryDeleted.protoMessageName: ["goals", "social"],
                Habitflow_Events_V1_HabitDeleted.protoMessageName: ["goals"],
            ]
        ) { runtime in
            let store = HabitsStore(pool: runtime.pool)
            let events = UserEvents(store: store, clock: clock, logger: runtime.logger)
            return [
                HabitsServiceHandler(
                    store: store, clock: clock, weekViews: weekViews, habitLists: HabitListCache(),
                    scoreHistoryCounts: WeekCountCache(capacity: 4_096),
                    scoreHistoryHabits: ScoredHabitsCache(capacity: 4_096), zoneHints: UserZoneHints()),
                HabitsInternalHandler(
                    store: store, clock: clock, weeklyScores: WeeklyScoreCache(), weekViews: weekViews),
                EventSubscriberService(pool: runtime.pool, consumer: UserEvents.consumer, apply: events.apply),
                ChangeNoticesService(runtime: runtime),
            ]
        }
    }
}
