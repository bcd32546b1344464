/// An error that knows the status a client should see for it: how a service's domain errors reach the wire.
///
/// A service's `Domain/` throws its own error enum, free of RPC types; one extension in its `RPC/` folder conforms
/// it, and the server's error mapping turns it into the status in one place.
public protocol RPCErrorConvertible: Error {
    var rpcError: RPCError { get }
}
