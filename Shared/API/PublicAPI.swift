internal import HabitFlowAuthProtos

/// Facts about the public API that the gateway and the client SDK must agree on.
public enum PublicAPI {
    /// The `:path`s of the methods a client calls without an access token: they are how it gets one (or gets back
    /// into its account). Every other public method needs `authorization: Bearer <access token>`.
    public static let unauthenticatedMethods: Set<String> = [
        Habitflow_Auth_V1_AuthService.Method.register.path,
        Habitflow_Auth_V1_AuthService.Method.login.path,
        Habitflow_Auth_V1_AuthService.Method.refresh.path,
        Habitflow_Auth_V1_AuthService.Method.socialLogin.path,
        Habitflow_Auth_V1_AuthService.Method.requestPasswordReset.path,
        Habitflow_Auth_V1_AuthService.Method.confirmPasswordReset.path,
        // The link in the confirmation mail may be opened on a device that is not signed in.
        Habitflow_Auth_V1_AuthService.Method.confirmEmailChange.path,
    ]
}
