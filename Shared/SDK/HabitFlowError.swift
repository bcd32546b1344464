public import HabitFlowRPC

/// Why a HabitFlow call failed, in terms an app can act on, with the server's status underneath.
///
/// ```swift
/// do {
///     _ = try await client.habits.createHabit(.with { $0.name = "" })
/// } catch let error as HabitFlowError where error.kind == .invalidInput {
///     for violation in error.fieldViolations { form.showError(violation.description, on: violation.field) }
/// }
/// ```
public struct HabitFlowError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// A request field broke a rule: see ``HabitFlowError/fieldViolations``.
        case invalidInput
        case notFound
        /// A create clashed with something that exists (a name that must be unique).
        case alreadyExists
        /// A limit or state forbids the call (for example the 15-habit limit).
        case failedPrecondition
        /// There is no usable session: sign in (again).
        case notSignedIn
        case permissionDenied
        /// Too many calls: retry after ``HabitFlowError/retryAfter``.
        case rateLimited
        /// The service could not be reached or is overloaded; the call may be retried later.
        case unavailable
        case timedOut
        case cancelled
        /// Anything else: a bug on one side or the other (the message and ``HabitFlowError/status`` tell more).
        case other
    }

    public var kind: Kind
    /// The status the call ended with (code, message and Google rich error details).
    public var status: RPCError

    public init(_ status: RPCError) {
        self.status = status
        self.kind =
            switch status.code {
            case .invalidArgument, .outOfRange: .invalidInput
            case .notFound: .notFound
            case .alreadyExists: .alreadyExists
            case .failedPrecondition, .aborted: .failedPrecondition
            case .unauthenticated: .notSignedIn
            case .permissionDenied: .permissionDenied
            case .resourceExhausted: .rateLimited
            case .unavailable: .unavailable
            case .deadlineExceeded: .timedOut
            case .cancelled: .cancelled
            default: .other
            }
    }

    /// Any error a call threw, as a ``HabitFlowError``.
    public init(_ error: any Error) {
        switch error {
        case let error as HabitFlowError: self = error
        case let error as RPCError: self.init(error)
        case is CancellationError: self.init(RPCError(.cancelled, "the call was cancelled"))
        default: self.init(RPCError(.unknown, "\(error)"))
        }
    }

    static func notSignedIn(_ message: String) -> HabitFlowError {
        HabitFlowError(RPCError.unauthenticated(reason: "NOT_SIGNED_IN", message))
    }

    public var code: RPCStatusCode { status.code }
    /// The server's message, for developers (not localized).
    public var message: String { status.message }
    /// Which request fields broke which rule (from `google.rpc.BadRequest`).
    public var fieldViolations: [FieldViolation] { status.fieldViolations }
    /// When a rate-limited or unavailable call may be retried (from `google.rpc.RetryInfo`).
    public var retryAfter: Duration? { status.retryDelay }
    /// A stable machine-readable reason (from `google.rpc.ErrorInfo`), for example `TOKEN_EXPIRED`.
    public var reason: String? { status.errorReason }

    public var description: String { "\(kind): \(status)" }
}
