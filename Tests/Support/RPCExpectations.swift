public import Foundation
public import HabitFlowRPC
internal import HabitFlowGRPCProtos
public import Testing

// Expectations the service suites share: errors with their status and field violations, instants in tests' clocks.

public func instantFrom(_ text: String) throws -> Date {
    try #require(ISO8601DateFormatter().date(from: text), "not an ISO 8601 instant: \(text)")
}

/// Runs `body`, which must fail with `code`; returns the error for further checks.
@discardableResult
public func expectError(
    _ code: RPCStatusCode, field: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> RPCError? {
    do {
        try await body()
        Issue.record("expected \(code), the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        if let field {
            #expect(
                error.fieldViolations.contains { $0.field == field }, "violations: \(error.fieldViolations)",
                sourceLocation: sourceLocation)
        }
        return error
    } catch {
        Issue.record("expected an RPCError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The `PreconditionFailure` violation type of an error (for example `HABIT_LIMIT`).
public func preconditionType(_ error: RPCError?) -> String? {
    error?.details.lazy.compactMap { try? Google_Rpc_PreconditionFailure(unpackingAny: $0) }.first?.violations.first?.type
}
