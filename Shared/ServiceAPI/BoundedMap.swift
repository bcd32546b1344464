/// A dictionary that keeps at most `capacity` keys: storing a new key when full drops the key stored longest ago
/// (first in, first out). Reads do not reorder, so a read stays one dictionary lookup.
public struct BoundedMap<Key: Hashable, Value> {
    public let capacity: Int
    private var values: [Key: Value] = [:]
    /// The keys in the order they were first stored, as a ring: `oldest` is the next to go when full.
    private var order: [Key] = []
    private var oldest = 0

    public init(capacity: Int) {
        precondition(capacity > 0, "a BoundedMap needs room for one key")
        self.capacity = capacity
    }

    public subscript(key: Key) -> Value? { values[key] }

    public var count: Int { values.count }

    public mutating func store(_ value: Value, for key: Key) {
        if values.updateValue(value, forKey: key) != nil { return }
        if order.count < capacity {
            order.append(key)
            return
        }
        values.removeValue(forKey: order[oldest])
        order[oldest] = key
        oldest = (oldest + 1) % capacity
    }
}

extension BoundedMap: Sendable where Key: Sendable, Value: Sendable {}
