internal import HabitFlowGRPCProtos

/// One rejected request field, as in `google.rpc.BadRequest.FieldViolation`: a path like `habit.name` or
/// `entries[2].date`, and which rule the value broke.
public struct FieldViolation: Sendable, Hashable {
    public var field: String
    public var description: String

    public init(field: String, description: String) {
        self.field = field
        self.description = description
    }
}

/// The errors services answer with, built the same way everywhere (DESIGN.md section 4): the right code, a message
/// for developers and Google's rich details, so clients can show which field broke which rule or when to retry.
extension RPCError {
    /// `INVALID_ARGUMENT` with a `BadRequest` listing every violation (the message names the first).
    public static func invalidArgument(_ violations: [FieldViolation]) -> RPCError {
        precondition(!violations.isEmpty, "invalidArgument needs at least one violation")
        var badRequest = Google_Rpc_BadRequest()
        badRequest.fieldViolations = violations.map { violation in
            var entry = Google_Rpc_BadRequest.FieldViolation()
            entry.field = violation.field
            entry.description_p = violation.description
            return entry
        }
        let first = violations[0]
        let more = violations.count > 1 ? " (and \(violations.count - 1) more)" : ""
        return RPCError(.invalidArgument, "\(first.field): \(first.description)\(more)").addingDetail(badRequest)
    }

    /// `INVALID_ARGUMENT` for one field.
    public static func invalidArgument(field: String, _ description: String) -> RPCError {
        invalidArgument([FieldViolation(field: field, description: description)])
    }

    /// `NOT_FOUND` with a `ResourceInfo`: also the answer for another user's resource, so ids leak nothing.
    public static func notFound(resourceType: String, name: String) -> RPCError {
        var info = Google_Rpc_ResourceInfo()
        info.resourceType = resourceType
        info.resourceName = name
        return RPCError(.notFound, "\(resourceType) \(name) not found").addingDetail(info)
    }

    /// `ALREADY_EXISTS` with a `ResourceInfo` naming what clashed (for example the field that must be unique).
    public static func alreadyExists(resourceType: String, name: String, _ message: String) -> RPCError {
        var info = Google_Rpc_ResourceInfo()
        info.resourceType = resourceType
        info.resourceName = name
        info.description_p = message
        return RPCError(.alreadyExists, message).addingDetail(info)
    }

    /// `FAILED_PRECONDITION` with a `PreconditionFailure`: a limit reached or a state that forbids the call.
    /// `type` is a stable machine-readable name such as `HABIT_LIMIT`.
    public static func failedPrecondition(type: String, subject: String, _ message: String) -> RPCError {
        var failure = Google_Rpc_PreconditionFailure()
        var violation = Google_Rpc_PreconditionFailure.Violation()
        violation.type = type
        violation.subject = subject
        violation.description_p = message
        failure.violations = [violation]
        return RPCError(.failedPrecondition, message).addingDetail(failure)
    }

    /// `FAILED_PRECONDITION` for a state that forbids the call and that a caller reacts to by name: the
    /// `PreconditionFailure` of ``failedPrecondition(type:subject:_:)`` (its `type` is `reason`), plus an `ErrorInfo`
    /// with `reason` (``errorReason``), for example `UNIT_MISMATCH`.
    public static func failedPrecondition(reason: String, subject: String, _ message: String) -> RPCError {
        var info = errorInfo(reason: reason)
        info.metadata["subject"] = subject
        return failedPrecondition(type: reason, subject: subject, message).addingDetail(info)
    }

    /// `RESOURCE_EXHAUSTED` with a `RetryInfo` telling the client when to try again.
    public static func resourceExhausted(_ message: String, retryAfter delay: Duration) -> RPCError {
        var retry = Google_Rpc_RetryInfo()
        let (seconds, attoseconds) = delay.components
        retry.retryDelay.seconds = seconds
        retry.retryDelay.nanos = Int32(attoseconds / 1_000_000_000)
        return RPCError(.resourceExhausted, message).addingDetail(retry)
    }

    /// `UNAUTHENTICATED` with an `ErrorInfo` whose `reason` is a stable name such as `TOKEN_EXPIRED`.
    public static func unauthenticated(reason: String, _ message: String) -> RPCError {
        RPCError(.unauthenticated, message).addingDetail(errorInfo(reason: reason))
    }

    /// `PERMISSION_DENIED` with an `ErrorInfo` reason.
    public static func permissionDenied(reason: String, _ message: String) -> RPCError {
        RPCError(.permissionDenied, message).addingDetail(errorInfo(reason: reason))
    }

    /// `INTERNAL` that carries only a correlation id (also in `ErrorInfo.metadata`), never internals: the id finds the
    /// full error in the service's log.
    public static func internalError(correlationID: String) -> RPCError {
        var info = errorInfo(reason: "INTERNAL")
        info.metadata["correlation_id"] = correlationID
        return RPCError(.internal, "internal error (correlation id \(correlationID))").addingDetail(info)
    }

    private static func errorInfo(reason: String) -> Google_Rpc_ErrorInfo {
        var info = Google_Rpc_ErrorInfo()
        info.reason = reason
        info.domain = "habitflow"
        return info
    }

    /// The `BadRequest` field violations this error carries (empty when it has none): what a client shows next to
    /// its form fields.
    public var fieldViolations: [FieldViolation] {
        details.compactMap { try? Google_Rpc_BadRequest(unpackingAny: $0) }.flatMap { request in
            request.fieldViolations.map { FieldViolation(field: $0.field, description: $0.description_p) }
        }
    }

    /// The retry delay of a `RetryInfo` detail, if any.
    public var retryDelay: Duration? {
        for detail in details {
            if let info = try? Google_Rpc_RetryInfo(unpackingAny: detail) {
                return .seconds(info.retryDelay.seconds) + .nanoseconds(Int64(info.retryDelay.nanos))
            }
        }
        return nil
    }

    /// The `ErrorInfo.reason` of this error, if any (for example `TOKEN_EXPIRED`).
    public var errorReason: String? {
        details.lazy.compactMap { try? Google_Rpc_ErrorInfo(unpackingAny: $0) }.first?.reason
    }
}
