import Synchronization
/// A growable FIFO ring buffer with value semantics (copy-on-write), for channel buffers: a
/// ``ChannelStateMachine`` is a value that is copied, which a ``Ring`` (manually managed, not
/// copyable) cannot be. A scheduler's own queues are ``Ring``s.
///
/// Not thread-safe: each instance is guarded by its channel's lock.
/// - Complexity: amortised O(1) `append` and `popFirst`.
@usableFromInline
struct RingBuffer<Element> {
    @usableFromInline var storage: [Element?]
    @usableFromInline var head = 0
    @usableFromInline private(set) var count = 0

    @inlinable init(capacity: Int = 16) {
        storage = capacity > 0 ? Array(repeating: nil, count: capacity) : []
    }

    @inlinable var isEmpty: Bool { count == 0 }

    @inlinable var first: Element? { count == 0 ? nil : storage[head] }

    @inlinable mutating func append(_ element: __owned Element) {
        if count == storage.count { grow() }
        var tail = head + count
        if tail >= storage.count { tail -= storage.count }
        storage[tail] = element
        count += 1
    }

    @inlinable mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let e = storage[head].take()
        head += 1
        if head == storage.count { head = 0 }
        count -= 1
        return e
    }

    @usableFromInline mutating func grow() {
        var new: [Element?] = Array(repeating: nil, count: Swift.max(storage.count * 2, 4))
        for i in 0..<count {
            var j = head + i
            if j >= storage.count { j -= storage.count }
            new[i] = storage[j].take()
        }
        storage = new
        head = 0
    }
}
