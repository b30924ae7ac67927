import Synchronization
/// A growable FIFO ring buffer, used for scheduler job queues and channel buffers.
///
/// Not thread-safe: each instance is confined to one scheduler thread or guarded by a lock.
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

    /// Removes the first element matching `predicate`, keeping the order of the others.
    /// - Complexity: O(n).
    @inlinable mutating func remove(where predicate: (Element) -> Bool) -> Bool {
        var i = 0
        while i < count {
            var j = head + i
            if j >= storage.count { j -= storage.count }
            if let e = storage[j], predicate(e) { break }
            i += 1
        }
        guard i < count else { return false }
        // Shift the later elements one slot towards the head.
        var k = i
        while k < count - 1 {
            var from = head + k + 1
            if from >= storage.count { from -= storage.count }
            var to = head + k
            if to >= storage.count { to -= storage.count }
            storage[to] = storage[from].take()
            k += 1
        }
        var last = head + count - 1
        if last >= storage.count { last -= storage.count }
        storage[last] = nil
        count -= 1
        return true
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
