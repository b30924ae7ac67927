/// A FIFO list of waiters that stores the first one inline, so the common case — one waiter —
/// allocates nothing.
///
/// The others are in `rest` from `restHead` on: taking the first moves `restHead` instead of
/// shifting the array (which made draining n waiters — an unlock or release per waiter — cost
/// O(n²) under the primitive's lock), and the taken prefix is dropped once it is over half of
/// the array, so the memory stays proportional to the waiters. A taken slot is emptied at once
/// (`nil`): it must not keep its waiter (a ticket holds its coroutine) alive until then.
///
/// Not thread-safe: lives inside a lock-protected state.
@usableFromInline
struct WaiterList<Element> {
    @usableFromInline var first: Element?
    @usableFromInline var rest: [Element?] = []
    /// The index in `rest` of the second waiter; `rest[..<restHead]` were taken already.
    @usableFromInline var restHead = 0

    @inlinable init() {}

    @inlinable var isEmpty: Bool { first == nil }

    @inlinable mutating func append(_ e: Element) {
        if first == nil { first = e } else { rest.append(e) }
    }

    /// Removes the first element matching `predicate` and returns it.
    /// - Complexity: O(n).
    @inlinable mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        if let f = first, predicate(f) {
            first = takeFromRest()
            return f
        }
        if let i = rest[restHead...].firstIndex(where: { predicate($0!) }) { return rest.remove(at: i) }
        return nil
    }

    /// Removes and returns the first element.
    /// - Complexity: O(1) amortised.
    @inlinable mutating func popFirst() -> Element? {
        guard let f = first else { return nil }
        first = takeFromRest()
        return f
    }

    /// The next of `rest`, taken, or nil.
    @inlinable mutating func takeFromRest() -> Element? {
        guard restHead < rest.count else { return nil }
        let e = rest[restHead].take()
        restHead += 1
        if restHead == rest.count {
            rest.removeAll(keepingCapacity: true)
            restHead = 0
        } else if restHead >= 16 && restHead * 2 >= rest.count {
            rest.removeFirst(restHead)
            restHead = 0
        }
        return e
    }

    /// Removes and returns the first ticket that can still be claimed (``WaitTicket/tryClaim()``),
    /// dropping stale ones (cancelled or timed-out waiters) on the way.
    @inlinable mutating func popClaimed() -> Element? where Element == WaitTicket {
        while let t = popFirst() {
            if t.tryClaim() { return t }
        }
        return nil
    }

    /// Calls `body` on every element in FIFO order.
    /// - Complexity: O(n).
    @inlinable func forEach(_ body: (Element) -> Void) {
        guard let first else { return }
        body(first)
        for e in rest[restHead...] { body(e!) }
    }
}
