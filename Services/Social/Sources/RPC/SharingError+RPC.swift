internal import HabitFlowCrypto
public import HabitFlowRPC

/// The statuses of the sharing settings' refusals, worded once.
extension SharingError: RPCErrorConvertible {
    public var rpcError: RPCError {
        switch self {
        case .categoryNotFound(let categoryID):
            .notFound(resourceType: "category", name: categoryID.lowercasedString)
        }
    }
}
