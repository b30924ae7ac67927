/// A FIFO list of waiters that stores the first one inline, so the common case — one waiter —
/// allocates nothing.
///
/// Not thread-safe: lives inside a lock-protected state.
@usableFromInline
struct WaiterList<Element> {
    @usableFromInline var first: Element?
    @usableFromInline var rest: [Element] = []

    @inlinable init() {}

    @inlinable var isEmpty: Bool { first == nil }

    @inlinable mutating func append(_ e: Element) {
        if first == nil { first = e } else { rest.append(e) }
    }

    /// Removes the first element matching `predicate` and returns it.
    @inlinable mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        if let f = first, predicate(f) {
            first = rest.isEmpty ? nil : rest.removeFirst()
            return f
        }
        if let i = rest.firstIndex(where: predicate) { return rest.remove(at: i) }
        return nil
    }

    /// Removes and returns the first element.
    @inlinable mutating func popFirst() -> Element? {
        guard let f = first else { return nil }
        first = rest.isEmpty ? nil : rest.removeFirst()
        return f
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
    @inlinable func forEach(_ body: (Element) -> Void) {
        guard let first else { return }
        body(first)
        for e in rest { body(e) }
    }
}
