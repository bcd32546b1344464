internal import HabitFlowAuthProtos
internal import HabitFlowGRPCSideServiceProtos
internal import HabitFlowGatewayProtos
internal import HabitFlowGoalsProtos
internal import HabitFlowRPC
internal import HabitFlowHabitsProtos
internal import HabitFlowRPCSideServices
internal import HabitFlowSocialProtos

/// What clients can reach through the gateway: the public service of each HabitFlow service, and nothing else.
/// Internal services (`AuthInternal`, `HabitsInternal`, `GoalsInternal`, `SocialInternal`, event subscribers) are
/// simply not routed: a client calling them gets `UNIMPLEMENTED`, as for any unknown method, and reflection does not show them.
enum GatewayRoutes {
    /// A public service and the process that owns it.
    struct Route {
        /// The fully qualified proto name.
        var service: String
        /// The owning process (`HABITFLOW_<OWNER>_ADDRESSES` lists its replicas).
        var owner: String
        /// The base64 descriptor set that declares it (for the method shapes and reflection).
        var descriptorSet: String
        /// Its messages as JSON, by method name (the generated table), for Connect clients that send JSON.
        var jsonTranscoders: [String: any MessageJSONTranscoding]
    }

    static let forwarded = [
        Route(
            service: Habitflow_Auth_V1_AuthService.name, owner: "auth", descriptorSet: AuthProtosDescriptorSet.base64,
            jsonTranscoders: Habitflow_Auth_V1_AuthService.jsonTranscoders),
        Route(
            service: Habitflow_Habits_V1_HabitsService.name, owner: "habits",
            descriptorSet: HabitFlowHabitsProtosDescriptorSet.base64,
            jsonTranscoders: Habitflow_Habits_V1_HabitsService.jsonTranscoders),
        Route(
            service: Habitflow_Goals_V1_GoalsService.name, owner: "goals",
            descriptorSet: HabitFlowGoalsProtosDescriptorSet.base64,
            jsonTranscoders: Habitflow_Goals_V1_GoalsService.jsonTranscoders),
        Route(
            service: Habitflow_Social_V1_SocialService.name, owner: "social",
            descriptorSet: HabitFlowSocialProtosDescriptorSet.base64,
            jsonTranscoders: Habitflow_Social_V1_SocialService.jsonTranscoders),
    ]

    /// The gateway's own services (served here, not forwarded).
    static let own = [Habitflow_Gateway_V1_GatewayService.name]

    static let healthService = Grpc_Health_V1_Health.name
    /// Health and reflection: served by the gateway itself, without an access token.
    static let sideServices: Set<String> = Set([healthService] + ReflectionService.serviceNames)

    /// Every descriptor set reflection needs (imports included).
    static var descriptorSets: [String] {
        forwarded.map(\.descriptorSet) + [HabitFlowGatewayProtosDescriptorSet.base64, GRPCSideServicesDescriptorSet.base64]
    }

    /// The services reflection lists: the public API and the side services.
    static var publicServiceNames: [String] {
        forwarded.map(\.service) + own + [healthService] + ReflectionService.serviceNames
    }
}
