import HabitFlowGRPCProtos
import HabitFlowRPC
import Testing

@Suite("standard errors (rich error model)")
struct StandardErrorTests {
    @Test("invalidArgument carries every field violation in a BadRequest and names the first in its message")
    func invalidArgument() throws {
        let error = RPCError.invalidArgument([
            FieldViolation(field: "habit.name", description: "must be 1 to 100 characters"),
            FieldViolation(field: "habit.weekly_target", description: "must be 1 to 21"),
        ])
        #expect(error.code == .invalidArgument)
        #expect(error.message == "habit.name: must be 1 to 100 characters (and 1 more)")
        #expect(error.fieldViolations.map(\.field) == ["habit.name", "habit.weekly_target"])
        let badRequest = try Google_Rpc_BadRequest(unpackingAny: try #require(error.details.first))
        #expect(badRequest.fieldViolations[1].description_p == "must be 1 to 21")
    }

    @Test("resourceExhausted carries the retry delay; internalError only a correlation id")
    func retryAndInternal() throws {
        let throttled = RPCError.resourceExhausted("too many attempts", retryAfter: .milliseconds(1500))
        #expect(throttled.code == .resourceExhausted)
        #expect(throttled.retryDelay == .milliseconds(1500))

        let internalError = RPCError.internalError(correlationID: "abc-123")
        #expect(internalError.code == .internal)
        #expect(internalError.message == "internal error (correlation id abc-123)")
        let info = try Google_Rpc_ErrorInfo(unpackingAny: try #require(internalError.details.first))
        #expect(info.metadata["correlation_id"] == "abc-123")
        #expect(internalError.errorReason == "INTERNAL")
    }

    @Test("notFound, alreadyExists, failedPrecondition and unauthenticated use their codes and details")
    func otherCodes() throws {
        #expect(RPCError.notFound(resourceType: "habit", name: "h1").code == .notFound)
        #expect(RPCError.alreadyExists(resourceType: "user", name: "email", "email taken").code == .alreadyExists)
        let limit = RPCError.failedPrecondition(type: "HABIT_LIMIT", subject: "habits", "at most 15 live habits")
        let failure = try Google_Rpc_PreconditionFailure(unpackingAny: try #require(limit.details.first))
        #expect(failure.violations.first?.type == "HABIT_LIMIT")
        let mismatch = RPCError.failedPrecondition(reason: "UNIT_MISMATCH", subject: "habits/h1", "km, not mi")
        #expect(mismatch.code == .failedPrecondition)
        #expect(mismatch.errorReason == "UNIT_MISMATCH")
        let mismatchFailure = try Google_Rpc_PreconditionFailure(unpackingAny: try #require(mismatch.details.first))
        #expect(mismatchFailure.violations.first?.type == "UNIT_MISMATCH")
        #expect(RPCError.unauthenticated(reason: "TOKEN_EXPIRED", "expired").errorReason == "TOKEN_EXPIRED")
        #expect(RPCError.resourceExhausted("x", retryAfter: .seconds(2)).fieldViolations.isEmpty)
    }
}
