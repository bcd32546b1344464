/// What a load run drives: how to open connections, how to make a virtual user, and the named operations a user
/// can perform.
///
/// The engine opens ``LoadPlan/connections`` connections, prepares ``LoadPlan/users`` users (not measured), then
/// calls ``perform(operation:user:connection:)`` with operations drawn from the plan's weighted mix. A user is
/// used by one request at a time, so an operation may change it (for example store a rotated refresh token).
public protocol LoadScenario: Sendable {
    /// One connection to the target (an `RPCChannel` for RPC scenarios).
    associatedtype Connection: Sendable
    /// One virtual user's state: credentials, the ids it created...
    associatedtype User: Sendable

    var name: String { get }
    /// Every operation the scenario can perform; a mix names a subset with weights.
    var operationNames: [String] { get }
    /// The mix used when none is given.
    var defaultMix: OperationMix { get }

    func openConnection(index: Int) async throws -> Connection
    func closeConnection(_ connection: Connection) async
    /// Signs up (or logs in) user `index`; runs before the measurement starts.
    func prepareUser(index: Int, connection: Connection) async throws -> User
    /// Performs one request; throws the `RPCError` the call ended with (counted by status code).
    func perform(operation: Int, user: inout User, connection: Connection) async throws
    /// Called once after the run with every user, for example to save credentials for the next run.
    func finish(users: [User]) async throws
}

extension LoadScenario {
    public func finish(users: [User]) async throws {}
}

/// A check an operation made on a response failed (the call itself succeeded); counted as `CLIENT_CHECK`.
public struct ResponseCheckFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
