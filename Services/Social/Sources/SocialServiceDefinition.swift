public import HabitFlowCalendar
internal import HabitFlowAuthProtos
internal import HabitFlowEvents
internal import HabitFlowHabitsProtos
internal import HabitFlowOutbox
public import HabitFlowServiceKit
internal import HabitFlowSocialProtos

/// The social service: friends and the requests that make them, blocks, one partner at a time, sharing settings and
/// the weekly leaderboard (seed 004 §3.10; DESIGN.md sections 3 "Social" and 3a "Partners", "Friends and privacy").
///
/// Serves `SocialService` (public, through the gateway), `SocialInternal` (goals asks for partners; the gateway's
/// dashboard and export) and `EventSubscriber` (auth's account events, habits' category deletions); calls
/// `AuthInternal` for people (lookups by email or username, names) and `HabitsInternal` for weekly scores. Publishes
/// `PartnershipStarted` and `PartnershipEnded` to goals. `ChangeNotices` tells the gateway's watchers whose data
/// changed (both users of a friend request or partnership).
public enum SocialServiceDefinition {
    /// - Parameter clock: where "now" comes from; tests pass their own.
    public static func make(clock: UserClock = .system) -> ServiceDefinition {
        ServiceDefinition(
            name: "social", descriptorSets: [HabitFlowSocialProtosDescriptorSet.base64],
            eventRoutes: [
                Habitflow_Events_V1_PartnershipStarted.protoMessageName: ["goals"],
                Habitflow_Events_V1_PartnershipEnded.protoMessageName: ["goals"],
            ]
        ) { runtime in
            let store = SocialStore(pool: runtime.pool, logger: runtime.logger)
            let people = PeopleSource(client: Habitflow_Auth_V1_AuthInternal.Client(
                transport: try runtime.channel(to: "auth")))
            let scores = ScoreSource(client: Habitflow_Habits_V1_HabitsInternal.Client(
                transport: try runtime.channel(to: "habits")))
            let leaderboards = LeaderboardReader(store: store, people: people, scores: scores, clock: clock)
            let events = SocialEvents(store: store, clock: clock, logger: runtime.logger)
            return [
                SocialServiceHandler(store: store, people: people, leaderboards: leaderboards, clock: clock),
                SocialInternalHandler(store: store, leaderboards: leaderboards, clock: clock),
                EventSubscriberService(pool: runtime.pool, consumer: SocialEvents.consumer, apply: events.apply),
                ChangeNoticesService(runtime: runtime),
            ]
        }
    }
}
